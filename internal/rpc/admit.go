package rpc

import (
	"fmt"
	"net"
	"syscall"
	"time"
)

// Connection admission. At most MaxConnections connections are open at
// once (accepted and not yet finished, framed or not): past it a new
// connection is closed at once, counted in daemon.stats refusedConns and
// logged at most once per refuseLogEvery (the line carries how many were
// refused since the last one). A connection that has not had initialize
// answered within InitializeTimeout of being accepted is closed
// (logged with reason initialize_timeout). With the cap, what partly read frames
// hold is at most MaxConnections × (max_message_bytes + 64 KiB): a frame's
// body is kept as it arrives, never allocated ahead from its header.

const refuseLogEvery = time.Second

// admit reports whether nc may be served (s.mu held); if not, it is
// counted and maybe logged, and the caller closes it.
func (s *Server) admitLocked() bool {
	if len(s.conns) < s.o.MaxConnections {
		return true
	}
	s.stats.refusedConns.Add(1)
	s.refusedSinceLog++
	if now := time.Now(); now.Sub(s.refusedLoggedAt) >= refuseLogEvery {
		s.log.Warn("connection refused: too many open connections", "reason", "max_connections",
			"open_connections", len(s.conns), "max_connections", s.o.MaxConnections, "refused_since_last_log", s.refusedSinceLog)
		s.refusedLoggedAt, s.refusedSinceLog = now, 0
	}
	return false
}

// deadlineReader is what a connection's bufio.Reader reads from; it sets
// the read deadline before each read: until initialize is answered, the
// connection's initialize deadline (initBy); once a frame has begun
// (inFrame), each read must bring a byte within stall (write_timeout), so
// a peer that stops in the middle of a message is closed
// (logged with reason frame_stalled); between messages, none (an idle client is
// fine). Used only by the connection's reading goroutine (initialize is
// answered on it).
type deadlineReader struct {
	conn    net.Conn
	initBy  time.Time // zero once initialized
	stall   time.Duration
	inFrame bool
	armed   bool // a deadline is set on conn (none: between messages, once initialized)
	// armedBy is the reason of the deadline the last read had.
	armedBy string
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	var at time.Time
	by := reasonFrameStalled
	if d.inFrame && d.stall > 0 {
		at = time.Now().Add(d.stall)
	}
	if !d.initBy.IsZero() && (at.IsZero() || d.initBy.Before(at)) {
		at, by = d.initBy, reasonInitTimeout
	}
	if !at.IsZero() || d.armed { // none set and none wanted: no call (one per message otherwise)
		d.conn.SetReadDeadline(at)
		d.armed = !at.IsZero()
	}
	d.armedBy = by
	return d.conn.Read(p)
}

// timeoutReason names the read deadline that ended a connection: the one
// armed for the read that timed out (a partial message stalled before
// initialize is frame_stalled when write_timeout came first).
func (d *deadlineReader) timeoutReason() string { return d.armedBy }

// RaiseFDLimit raises the soft RLIMIT_NOFILE to the hard limit, so that
// connections (at most max_connections) leave descriptors for providers'
// pipes and the store; it returns the soft limit now in force.
func RaiseFDLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	if rl.Cur < rl.Max {
		want := rl
		want.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return rl.Cur, fmt.Errorf("setrlimit nofile %d: %w", rl.Max, err)
		}
		rl = want
	}
	return rl.Cur, nil
}
