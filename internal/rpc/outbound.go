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
// past max, the slowest reader is closed, logged once: among the
// connections stalled (holding unwritten bytes with no byte written for
// stallAfter), the one stalled longest, the most unwritten bytes breaking
// a tie; when none is stalled, the one holding the most unwritten bytes.
// A reader that keeps up is never stalled, and a reply just encoded for
// it is not older than the frame that passed the budget, so it is not
// chosen for being a few nanoseconds older than a large frame for a
// connection that never reads. Its writers fail at once and their frames
// leave the count. A connection already closed this way is not counted
// again, so one overflow closes one connection, not many.
//
// Lock order: outbound.mu only; never held while writing.
type outbound struct {
	max    int64
	stall  time.Duration // no byte written for this long: stalled
	log    *slog.Logger
	total  atomic.Int64  // unwritten bytes of every connection
	closes atomic.Uint64 // connections closed for the budget

	mu      sync.Mutex
	streams map[*stream]string // every served connection's stream → its id
}

// stallAfter is how long a connection holding unwritten bytes may go
// without writing one before it counts as stalled. A client that reads
// is written to within microseconds; a second covers a busy machine.
const stallAfter = time.Second

func newOutbound(max int64, log *slog.Logger) *outbound {
	return &outbound{max: max, stall: stallAfter, log: log, streams: map[*stream]string{}}
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
	stalledBefore := time.Now().Add(-o.stall).UnixNano()
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
		if since := s.since.Load(); victim == nil || slower(since, p, oldest, most, stalledBefore) {
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

// slower reports whether a connection holding p unwritten bytes since
// since is a better victim than the one holding most since oldest:
// stalled (since before stalledBefore) beats not stalled; between two
// stalled, the longer stalled, then the more bytes; between two not
// stalled, the more bytes, then the longer held.
func slower(since, p, oldest, most, stalledBefore int64) bool {
	stalled, victimStalled := since < stalledBefore, oldest < stalledBefore
	switch {
	case stalled != victimStalled:
		return stalled
	case stalled && since != oldest:
		return since < oldest
	case p != most:
		return p > most
	default:
		return since < oldest
	}
}
