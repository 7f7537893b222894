package journal

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// Rows are the JSON of event.Event as event.AppendJSON writes it (one
// encoder for the store and the wire). A read hands every row out as
// stored, in Event.Raw, with the fields decoded beside it for the daemon's
// own use; decodeFast takes the fixed shape without reflection, a row of
// any other shape still decodes through encoding/json (and is re-encoded
// into that shape), and one that is not an event is an error.

var errBadRow = errors.New("row is not an event")

// arenaChunk is the allocation unit rows are copied into during a read.
const arenaChunk = 64 << 10

// rowReader decodes the rows of one read. Rows are copied into a shared
// arena (one allocation per 64 KiB, not one per row); an event's Raw and
// Data are slices of it. Consecutive rows repeat their time and turn: the
// last ones are reused instead of parsed and allocated again.
//
// A row goes to the wire as stored, so it must be valid JSON. Rows this
// process wrote (seq > loaded) are, by construction (AppendJSON of drafts
// whose data was checked); rows found in the file are validated until a
// read has seen them all valid (seq <= verified; rows never change once
// written). Only untrusted rows pay for json.Valid.
type rowReader struct {
	arena    []byte
	atText   string // last time seen (plain), and its value
	at       time.Time
	lastType string // last type seen (plain)
	lastTurn string // last turn seen (plain)
	idSeen   string // the session id last asked for, and whether it is plain
	idPlain  bool

	loaded, verified uint64
	validate         bool // every row (decodeEvent)
}

func (rr *rowReader) trusted(seq uint64) bool {
	return !rr.validate && (seq > rr.loaded || seq <= rr.verified)
}

// own copies v (valid only inside the read transaction) into the arena.
func (rr *rowReader) own(v []byte) []byte {
	if cap(rr.arena)-len(rr.arena) < len(v) {
		rr.arena = make([]byte, 0, max(arenaChunk, len(v)))
	}
	n := len(rr.arena)
	rr.arena = append(rr.arena, v...)
	return rr.arena[n : n+len(v) : n+len(v)]
}

// event decodes the row stored under (id, seq) and sets its Raw: the row
// itself when it is in the canonical shape and agrees with its key, else
// the event re-encoded.
func (rr *rowReader) event(id string, seq uint64, v []byte) (event.Event, error) {
	raw := rr.own(v)
	ev, ok := rr.decodeFast(raw, id, !rr.trusted(seq))
	if !ok {
		var err error
		if ev, err = decodeSlow(raw); err != nil {
			return event.Event{}, err
		}
	}
	if ok && ev.Seq == seq && ev.SessionID == id {
		ev.Raw = raw
		return ev, nil
	}
	ev.Seq, ev.SessionID = seq, id
	ev.Raw = event.AppendJSON(nil, &ev)
	return ev, nil
}

// decodeEvent parses a row; Data refers to v.
func decodeEvent(v []byte) (event.Event, error) {
	rr := rowReader{validate: true}
	if ev, ok := rr.decodeFast(v, "", true); ok {
		return ev, nil
	}
	return decodeSlow(v)
}

// slowDecodes counts rows decoded by the general decoder: a test hook
// (a common row that leaves the fast path costs only speed, so only this
// count shows it).
var slowDecodes atomic.Uint64

func decodeSlow(v []byte) (event.Event, error) {
	slowDecodes.Add(1)
	var ev event.Event
	if err := json.Unmarshal(v, &ev); err != nil {
		return event.Event{}, err
	}
	if ev.Type == "" {
		return event.Event{}, errBadRow
	}
	return ev, nil
}

// decodeFast parses the shape event.AppendJSON writes, with no escapes in
// its strings; false means "use the slow path". A sessionId equal to id
// shares id's string. validate checks that data is valid JSON.
// Consecutive rows mostly repeat their session, time, type and turn: each
// is first compared, as a whole quoted string, with the last one seen
// (a plain string followed by its closing quote is that string), and
// only scanned when it differs.
func (rr *rowReader) decodeFast(p []byte, id string, validate bool) (ev event.Event, ok bool) {
	var s []byte
	if p, ok = cut(p, `{"sessionId":`); !ok {
		return ev, false
	}
	if rr.idSeen != id || id == "" {
		rr.idSeen, rr.idPlain = id, isPlain(id)
	}
	if q, same := quoted(p, id); same && rr.idPlain {
		ev.SessionID, p = id, q
	} else {
		if s, p, ok = plainString(p); !ok {
			return ev, false
		}
		if ev.SessionID = id; string(s) != id {
			ev.SessionID = string(s)
		}
	}
	if p, ok = cut(p, `,"seq":`); !ok {
		return ev, false
	}
	var seq uint64
	i := 0
	for ; i < len(p) && p[i] >= '0' && p[i] <= '9'; i++ {
		seq = seq*10 + uint64(p[i]-'0')
	}
	if i == 0 || i > 20 || i > 1 && p[0] == '0' { // JSON has no leading zero
		return ev, false
	}
	if i > 19 { // may overflow: parse again, checked
		var err error
		if seq, err = strconv.ParseUint(string(p[:i]), 10, 64); err != nil {
			return ev, false
		}
	}
	ev.Seq = seq
	if p, ok = cut(p[i:], `,"at":`); !ok {
		return ev, false
	}
	if q, same := quoted(p, rr.atText); same && rr.atText != "" {
		p = q
	} else {
		if s, p, ok = plainString(p); !ok {
			return ev, false
		}
		at, err := time.Parse(time.RFC3339Nano, string(s))
		if err != nil {
			return ev, false
		}
		rr.atText, rr.at = string(s), at
	}
	ev.At = rr.at
	if p, ok = cut(p, `,"type":`); !ok {
		return ev, false
	}
	if q, same := quoted(p, rr.lastType); same && rr.lastType != "" {
		p = q
	} else {
		if s, p, ok = plainString(p); !ok || len(s) == 0 {
			return ev, false
		}
		rr.lastType = internType(s)
	}
	ev.Type = rr.lastType
	if q, found := cut(p, `,"turnId":`); found {
		if r, same := quoted(q, rr.lastTurn); same && rr.lastTurn != "" {
			p = r
		} else {
			if s, p, ok = plainString(q); !ok {
				return ev, false
			}
			rr.lastTurn = string(s)
		}
		ev.TurnID = rr.lastTurn
	}
	if q, found := cut(p, `,"data":`); found {
		n := len(q) - 1
		if n < 1 || q[n] != '}' || validate && !json.Valid(q[:n]) {
			return ev, false
		}
		ev.Data = q[:n:n]
		return ev, true
	}
	return ev, string(p) == "}"
}

// quoted reports whether p starts with the JSON string "s" (s plain: no
// quote, backslash or control byte) and returns what follows it.
func quoted(p []byte, s string) ([]byte, bool) {
	n := len(s)
	if len(p) < n+2 || p[0] != '"' || p[n+1] != '"' || string(p[1:n+1]) != s {
		return p, false
	}
	return p[n+2:], true
}

// isPlain reports whether s needs no escape inside a JSON string.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
}

func cut(p []byte, prefix string) ([]byte, bool) {
	if len(p) < len(prefix) || string(p[:len(prefix)]) != prefix {
		return p, false
	}
	return p[len(prefix):], true
}

// plainString reads a JSON string without escapes.
func plainString(p []byte) (s, rest []byte, ok bool) {
	if len(p) == 0 || p[0] != '"' {
		return nil, p, false
	}
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			return p[1:i], p[i+1:], true
		case c == '\\' || c < 0x20:
			return nil, p, false
		}
	}
	return nil, p, false
}

var knownTypes = []string{event.SessionCreated, event.LeaseAcquired, event.ProviderStarted,
	event.ProviderThreadReplace, event.TurnStarted, event.MessageDelta, event.MessageCompleted,
	event.ApprovalRequested, event.ApprovalResolved, event.TurnCompleted, event.ProviderExited,
	event.SessionEnded, event.LeaseReleased, event.JournalLoss}

// internType returns the constant for a known type (no allocation).
func internType(b []byte) string {
	for _, t := range knownTypes {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}
