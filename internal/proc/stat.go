package proc

import (
	"bytes"
	"errors"
)

// errBadStat: a /proc/<pid>/stat line did not parse.
var errBadStat = errors.New("proc: malformed stat line")

// statInfo is what we use of /proc/<pid>/stat.
type statInfo struct {
	State      byte // R, S, D, Z, X, …
	PPID       int
	PGID       int
	SID        int
	NumThreads int
	StartTicks uint64
}

// zombie reports whether the process has exited (waiting to be reaped or
// being reaped): it counts as gone. A leader already a zombie while other
// threads still exit has not exited yet (its pidfd is not readable either).
func (s statInfo) zombie() bool {
	return (s.State == 'Z' || s.State == 'X' || s.State == 'x') && s.NumThreads <= 1
}

// parseStat parses a /proc/<pid>/stat line without allocating. The comm
// field may contain spaces and ')' so the fields start after the LAST ')'.
func parseStat(b []byte) (statInfo, error) {
	var s statInfo
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return s, errBadStat
	}
	b = b[i+2:] // skip ") "
	// fields from 3 (state): 3 state, 4 ppid, 5 pgrp, 6 session, …, 20 num_threads,
	// …, 22 starttime.
	field := 3
	for field <= 22 {
		j := bytes.IndexByte(b, ' ')
		var f []byte
		if j < 0 {
			f, b = b, nil
		} else {
			f, b = b[:j], b[j+1:]
		}
		switch field {
		case 3:
			if len(f) != 1 {
				return s, errBadStat
			}
			s.State = f[0]
		case 4, 5, 6:
			n, ok := parseUint(f)
			if !ok {
				return s, errBadStat
			}
			switch field {
			case 4:
				s.PPID = int(n)
			case 5:
				s.PGID = int(n)
			default:
				s.SID = int(n)
			}
		case 20:
			n, ok := parseUint(f)
			if !ok {
				return s, errBadStat
			}
			s.NumThreads = int(n)
		case 22:
			n, ok := parseUint(bytes.TrimRight(f, "\n"))
			if !ok {
				return s, errBadStat
			}
			s.StartTicks = n
			return s, nil
		}
		if b == nil {
			return s, errBadStat
		}
		field++
	}
	return s, errBadStat
}

func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (^uint64(0)-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// envTags extracts our tags from a NUL-separated environ block.
func envTags(environ []byte) (t Tags, fenceOK bool) {
	for len(environ) > 0 {
		var kv []byte
		if j := bytes.IndexByte(environ, 0); j >= 0 {
			kv, environ = environ[:j], environ[j+1:]
		} else {
			kv, environ = environ, nil
		}
		k, v, ok := bytes.Cut(kv, []byte{'='})
		if !ok || len(k) < 9 || string(k[:9]) != "SESSIOND_" {
			continue
		}
		switch string(k) {
		case EnvSessionID:
			t.SessionID = string(v)
		case EnvRuntimeID:
			t.RuntimeID = string(v)
		case EnvStateID:
			t.StateID = string(v)
		case EnvFence:
			n, ok := parseUint(v)
			t.Fence, fenceOK = n, ok
		}
	}
	return t, fenceOK
}

// matches reports whether tags found on a process belong to t: same
// state id and, for a runtime's tags, the same runtime id; for a
// session's, the same session id and the same fence unless t.Fence is 0.
func (t Tags) matches(got Tags) bool {
	if t.empty() || got.StateID != t.StateID {
		return false
	}
	if t.RuntimeID != "" {
		return got.RuntimeID == t.RuntimeID
	}
	if got.SessionID != t.SessionID {
		return false
	}
	return t.Fence == 0 || got.Fence == t.Fence
}
