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
// One reply or notification larger than the budget (a page holds at
// least one event, and one event may be bigger than max) is written to a
// reader that keeps up (spare). The total then passes max by that one
// connection's frames, until they are written; a reader that stops
// (stalled) is closed at the next frame counted, or by write_timeout.
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
	s.frames.Add(1)
	if s.pending.Add(int64(n)) == int64(n) {
		s.since.Store(time.Now().UnixNano()) // it starts waiting for its reader now
		s.sentAt.Store(s.sent.Load())
	}
	if o.total.Add(int64(n)) > o.max {
		o.shed()
	}
}

// written takes n bytes of s out of the count.
func (o *outbound) written(s *stream, n int) {
	if n > 0 {
		s.since.Store(time.Now().UnixNano()) // progress
		s.sent.Add(int64(n))
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
	var best candidate
	var live int64
	for s := range o.streams {
		if s.shed.Load() {
			continue
		}
		p := s.pending.Load()
		live += p
		if p == 0 {
			continue
		}
		c := candidate{pending: p, since: s.since.Load()}
		c.stalled = c.since < stalledBefore
		if !c.stalled {
			c.unread = peerUnread(s.conn) // only needed to rank the not yet stalled
			c.leftUnread = c.unread > 0 && p > writeChunk
			c.reading = s.sent.Load()-s.sentAt.Load()-c.unread > 0
		}
		if victim == nil || c.slower(best) {
			victim, best = s, c
		}
	}
	if victim == nil || live <= o.max || o.spare(victim, best, live) {
		o.mu.Unlock()
		return
	}
	victim.shed.Store(true)
	id := o.streams[victim]
	o.mu.Unlock()
	o.closes.Add(1)
	o.log.Warn("closing connection: over the outbound byte budget", "conn_id", id, "reason", "outbound_budget",
		"unwritten_bytes", best.pending, "total_unwritten_bytes", live, "max_outbound_bytes", o.max)
	victim.Close()
}

// spare reports whether shed leaves victim (ranked c, of live bytes in
// all) alone: it is not stalled, the other connections fit within max,
// and either that one frame is all it holds and its peer has read what
// its socket holds, or the frame being written to it is larger than max
// (it could never fit: only a reader that keeps up gets it, and one that
// stops is stalled within stallAfter). Needs o.mu.
func (o *outbound) spare(victim *stream, c candidate, live int64) bool {
	if c.stalled || live-c.pending > o.max {
		return false
	}
	return c.unread == 0 && victim.frames.Load() == 1 || victim.writing.Load() > o.max
}

// candidate is a connection's state as shed ranks it: unwritten bytes,
// since when (unix ns) with no byte written, stalled (that for longer
// than stallAfter), and the bytes its socket already holds that the peer
// has not read (peerUnread; 0 for a stalled one, where it is not read).
//
// leftUnread (not stalled): its peer has left bytes unread and it holds
// more than one write's worth (writeChunk). A write the kernel has just
// taken is still counted until its writer counts it out, so a small
// reply in flight to a peer about to read it shows in both counts; only
// past one chunk are some of the pending bytes surely still the
// daemon's, waiting on a peer that does not read.
//
// reading (not stalled): its peer has read some of what was written
// since the stream began to hold unwritten bytes (a slow reader, not one
// that stopped). A peer that never reads has read none of it: all that
// was written since sits in its socket.
type candidate struct {
	pending, since, unread       int64
	stalled, leftUnread, reading bool
}

// slower reports whether c is a better victim than v: stalled beats not
// stalled; between two stalled, the longer stalled, then the more bytes.
// Between two not stalled, one whose peer has left bytes in its socket
// unread (leftUnread) beats one that has read all it was sent: a burst
// of connections that never read is not a second old yet, and a
// reader's larger reply just counted must not make it the victim; then
// one whose peer has read nothing of it since it began to hold bytes
// beats one that reads, however slowly (a slow reader's last progress is
// older than a burst's first frame, and their unwritten bytes are equal
// once both sockets are full); then the more unwritten bytes, then the
// longer held.
func (c candidate) slower(v candidate) bool {
	switch {
	case c.stalled != v.stalled:
		return c.stalled
	case c.stalled && c.since != v.since:
		return c.since < v.since
	case !c.stalled && c.leftUnread != v.leftUnread:
		return c.leftUnread
	case !c.stalled && c.reading != v.reading:
		return !c.reading
	case c.pending != v.pending:
		return c.pending > v.pending
	default:
		return c.since < v.since
	}
}
