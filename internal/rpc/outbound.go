package rpc

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// outbound bounds the bytes the daemon holds, across all its connections,
// for output not yet written: replies and notifications encoded and
// waiting for (or in) their connection's write. Every frame is counted
// from the moment it is encoded until its last byte is written (bytes
// leave the count as they are written). When a frame takes the total
// past max, the slowest reader is closed, logged once: the connection that
// has held unwritten bytes for longest with no byte written (a reply just
// encoded for a reader that keeps up is the newest, never the slowest),
// the most unwritten bytes breaking a tie. Its writers fail at once and
// their frames leave the count. A connection already closed this way is
// not counted again, so one overflow closes one connection, not many.
//
// Lock order: outbound.mu only; never held while writing.
type outbound struct {
	max    int64
	log    *slog.Logger
	total  atomic.Int64  // unwritten bytes of every connection
	closes atomic.Uint64 // connections closed for the budget

	mu      sync.Mutex
	streams map[*stream]string // every served connection's stream → its id
}

func newOutbound(max int64, log *slog.Logger) *outbound {
	return &outbound{max: max, log: log, streams: map[*stream]string{}}
}

func (o *outbound) register(s *stream, connID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.streams[s] = connID
	s.budget = o
}

func (o *outbound) unregister(s *stream) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.streams, s)
}

// hold counts n more unwritten bytes of s and sheds a connection if the
// total is now past max.
func (o *outbound) hold(s *stream, n int) {
	if s.pending.Add(int64(n)) == int64(n) {
		s.since.Store(time.Now().UnixNano()) // it starts waiting for its reader now
	}
	if o.total.Add(int64(n)) > o.max {
		o.shed()
	}
}

// written takes n bytes of s out of the count.
func (o *outbound) written(s *stream, n int) {
	if n > 0 {
		s.since.Store(time.Now().UnixNano()) // progress
	}
	s.pending.Add(-int64(n))
	o.total.Add(-int64(n))
}

// shed closes the slowest reader (see outbound), if the connections not
// already shed still hold more than max.
func (o *outbound) shed() {
	o.mu.Lock()
	var victim *stream
	var live, most, oldest int64
	for s := range o.streams {
		if s.shed.Load() {
			continue
		}
		p := s.pending.Load()
		live += p
		if p == 0 {
			continue
		}
		since := s.since.Load()
		if victim == nil || since < oldest || since == oldest && p > most {
			victim, most, oldest = s, p, since
		}
	}
	if victim == nil || live <= o.max {
		o.mu.Unlock()
		return
	}
	victim.shed.Store(true)
	id := o.streams[victim]
	o.mu.Unlock()
	o.closes.Add(1)
	o.log.Warn("closing connection: over the outbound byte budget", "conn_id", id, "reason", "outbound_budget",
		"unwritten_bytes", most, "total_unwritten_bytes", live, "max_outbound_bytes", o.max)
	victim.Close()
}
