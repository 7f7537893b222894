package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// The last writes before a live upgrade's exec: daemon.restarting to every
// connection, then no write in progress (Restarting); Unseal undoes it
// after a failed exec.

// Restarting writes daemon.restarting to every framed connection (each
// write bounded by d) and then lets nothing more be written to them until
// Unseal: a frame cut by the exec would reach a client half written. A
// connection still busy writing after 2*d (a peer reading slowly), or
// whose notification did not go whole, is closed: Close returns only once
// its write has ended, so no write is in progress when Restarting returns.
// Those connections are returned: none of them may be handed over.
func (s *Server) Restarting(n api.RestartingNotice, d time.Duration) (dropped []net.Conn) {
	// A new attempt: an earlier one's Unseal (a failed exec) must not
	// make every seal fail. No seal of that attempt still runs.
	s.sealed.mu.Lock()
	s.sealed.unsealed = false
	s.sealed.mu.Unlock()
	s.mu.Lock()
	var conns []*conn
	for _, c := range s.conns {
		if c != nil {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	b, _ := json.Marshal(notification{JSONRPC: "2.0", Method: NotifyRestarting, Params: n})
	whole := make([]bool, len(conns))
	done := make([]chan struct{}, len(conns))
	for i, c := range conns {
		done[i] = make(chan struct{})
		go func() {
			defer close(done[i])
			whole[i] = c.st.seal(b, d, &s.sealed)
		}()
	}
	t := time.NewTimer(2 * d)
	defer t.Stop()
	expired := false
	for i, c := range conns {
		if !expired {
			select {
			case <-done[i]:
				continue
			case <-t.C:
				expired = true
			}
		}
		select {
		case <-done[i]:
		default:
			c.st.Close() // ends its write in progress; seal then fails at once
			<-done[i]
		}
	}
	for i, c := range conns {
		if !whole[i] {
			c.st.Close()
			dropped = append(dropped, c.st.conn)
		}
	}
	return dropped
}

// sealSet tracks sealed streams; Unseal releases them.
type sealSet struct {
	mu       sync.Mutex
	unsealed bool
	streams  []*stream
}

// seal takes the stream's write lock for good, after writing one last
// frame with deadline d; whole says the frame went whole.
func (st *stream) seal(body []byte, d time.Duration, set *sealSet) (whole bool) {
	var frame []byte
	if st.framing == FramingHeader {
		frame = append([]byte(fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))), body...)
	} else {
		frame = append(append([]byte(nil), body...), '\n')
	}
	st.wmu.Lock()
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.unsealed {
		st.wmu.Unlock()
		return false
	}
	set.streams = append(set.streams, st)
	if st.closed() {
		return false
	}
	_ = st.conn.SetWriteDeadline(time.Now().Add(d))
	n, err := st.conn.Write(frame)
	return err == nil && n == len(frame)
}

// Unseal undoes Restarting after a failed exec: every connection but keep
// (the caller of daemon.upgrade, which gets its answer) is closed (each
// was told the daemon restarts; its client reconnects).
func (s *Server) Unseal(keep net.Conn) {
	s.sealed.mu.Lock()
	s.sealed.unsealed = true
	streams := s.sealed.streams
	s.sealed.streams = nil
	s.sealed.mu.Unlock()
	for _, st := range streams {
		if keep != nil && st.conn == keep {
			_ = st.conn.SetWriteDeadline(time.Time{})
			st.wmu.Unlock()
			continue
		}
		st.wmu.Unlock()
		st.Close()
	}
	s.mu.Lock()
	for nc := range s.conns {
		if keep == nil || nc != keep {
			nc.Close()
		}
	}
	s.mu.Unlock()
}

// upgradeCalls counts daemon.upgrade calls until their answer is written.
type upgradeCalls struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n reaches 0; nil while n is 0
}

func (u *upgradeCalls) add(d int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n == 0 && d > 0 {
		u.idle = make(chan struct{})
	}
	u.n += d
	if u.n == 0 && u.idle != nil {
		close(u.idle)
		u.idle = nil
	}
}

// WaitUpgradeAnswered waits (within ctx) until every daemon.upgrade call
// has been answered: a shutdown that aborted an upgrade lets its refusal
// reach the caller before closing connections.
func (s *Server) WaitUpgradeAnswered(ctx context.Context) {
	s.upg.mu.Lock()
	idle := s.upg.idle
	s.upg.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}
