package rpc

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// daemon.status is answered often (clients poll it) and most of it never
// changes while the server runs: version, pid, start time, socket, state
// dir and id, supervision. Those parts are encoded once, as json.Marshal
// of Status encodes them; each call appends only the session counts, the
// open connections and the providers. (Marshalling the whole Status by
// reflection, plus a getpid(2) and a time format, each call cost about
// as much as the rest of the call's server side but the read and write.)

// statusParts are the bytes of a Status before "sessions" and from
// "supervision" on.
type statusParts struct {
	once       sync.Once
	head, tail []byte
}

// parts encodes the static parts on first use (the options are set
// before Serve and not changed after).
func (s *Server) statusParts() *statusParts {
	p := &s.status
	p.once.Do(func() {
		all, err := json.Marshal(Status{
			Version: s.o.Version, ProtocolVersion: api.ProtocolVersion, PID: os.Getpid(),
			StartedAt: s.o.StartedAt.UTC().Format(time.RFC3339Nano), Socket: s.o.Socket,
			StateDir: s.o.StateDir, StateID: s.o.StateID, Supervision: supervision(s.o.Supervision),
		})
		if err != nil {
			panic("rpc: daemon.status does not marshal: " + err.Error()) // strings, ints and bools always do
		}
		// A string value's quotes are escaped, so the first unescaped
		// `,"sessions":` and the `,"supervision":` after it are the keys.
		i := bytes.Index(all, []byte(`,"sessions":`))
		j := i + bytes.Index(all[i:], []byte(`,"supervision":`))
		p.head, p.tail = all[:i], all[j:]
	})
	return p
}

// encodeStatus is json.Marshal(Status{…static…, Sessions: counts,
// Connections: conns, Providers: providers}) (providers nil: []).
func (s *Server) encodeStatus(counts api.SessionCounts, conns int, providers []string) rawResult {
	return s.encodeStatusWith(counts, conns, providers, nil)
}

// runtimeLister is a Backend that lists shared runtimes (daemon.status.runtimes).
type runtimeLister interface {
	Runtimes() []api.RuntimeInfo
}

// encodeStatusWith is encodeStatus with extra (`,"runtimes":[…]` or
// nothing) before "supervision".
func (s *Server) encodeStatusWith(counts api.SessionCounts, conns int, providers []string, extra []byte) rawResult {
	p := s.statusParts()
	n := len(p.head) + len(p.tail) + 96 + len(extra)
	for _, name := range providers {
		n += len(name) + 3
	}
	b := pooledRaw(n)
	b = append(b, p.head...)
	b = append(b, `,"sessions":{"stored":`...)
	b = strconv.AppendInt(b, int64(counts.Stored), 10)
	b = append(b, `,"live":`...)
	b = strconv.AppendInt(b, int64(counts.Live), 10)
	b = append(b, `},"connections":`...)
	b = strconv.AppendInt(b, int64(conns), 10)
	b = append(b, `,"providers":[`...)
	for i, name := range providers {
		if i > 0 {
			b = append(b, ',')
		}
		b = event.AppendString(b, name)
	}
	b = append(b, ']')
	if s.o.Attention != nil {
		at, err := json.Marshal(s.o.Attention())
		if err != nil {
			panic("rpc: daemon.status attention does not marshal: " + err.Error()) // strings and bools always do
		}
		b = append(b, `,"attention":`...)
		b = append(b, at...)
	}
	b = append(b, extra...)
	b = append(b, p.tail...)
	return rawResult{buf: b, off: rawHead, pooled: true}
}
