package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// The server's part of a live upgrade (daemon.upgrade): hold new calls and
// wait for those in flight (PauseCalls), stop accepting while keeping the
// listening socket (StopAccepting), and tell every connection it is about
// to close (Restarting). The orchestration is ServerOptions.Upgrade's.

// NotifyRestarting is the last notification a connection gets before a
// live upgrade closes it.
const NotifyRestarting = "daemon.restarting"

// UpgradeCaller is the connection that called daemon.upgrade: the next
// image writes the answer on its descriptor, in its framing, with its id.
type UpgradeCaller struct {
	Conn    *net.UnixConn
	Framing Framing
	ID      json.RawMessage
}

// ErrUpgrading means another daemon.upgrade is in progress.
var ErrUpgrading = errors.New("an upgrade is already in progress")

type ctxKey int

const callerKey ctxKey = 0

// callGate holds new calls during an upgrade and counts those in flight.
type callGate struct {
	mu       sync.Mutex
	paused   bool
	inflight int
	resumed  chan struct{} // closed by resume
	idle     chan struct{} // closed when inflight reaches 0 while paused
}

func (g *callGate) enter(ctx context.Context) bool {
	for {
		g.mu.Lock()
		if !g.paused {
			g.inflight++
			g.mu.Unlock()
			return true
		}
		ch := g.resumed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (g *callGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if g.paused && g.inflight == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// PauseCalls holds every new call (they wait, unread calls stay unread)
// and waits until none is in flight but the caller's own, within ctx;
// past it the calls go on and the error says how many were running.
func (s *Server) PauseCalls(ctx context.Context) error {
	g := &s.gate
	g.mu.Lock()
	if g.paused {
		g.mu.Unlock()
		return ErrUpgrading
	}
	g.paused, g.resumed = true, make(chan struct{})
	if g.inflight == 0 {
		g.mu.Unlock()
		return nil
	}
	g.idle = make(chan struct{})
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		n := g.inflight
		g.mu.Unlock()
		s.ResumeCalls()
		return fmt.Errorf("%d calls still in flight: %w", n, context.Cause(ctx))
	}
}

// ResumeCalls lets held calls run again (an abandoned upgrade).
func (s *Server) ResumeCalls() {
	g := &s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused {
		g.paused, g.idle = false, nil
		close(g.resumed)
	}
}

// acceptPause stops Serve's accept loop without closing the listener.
type acceptPause struct {
	mu      sync.Mutex
	paused  bool
	resumed chan struct{}
}

// StopAccepting makes every Serve loop stop accepting (connections wait
// in the socket's backlog for whoever accepts next) and returns the
// listeners, still open.
func (s *Server) StopAccepting() []net.Listener {
	s.accept.mu.Lock()
	s.accept.paused, s.accept.resumed = true, make(chan struct{})
	s.accept.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ls []net.Listener
	for l := range s.listeners {
		if d, ok := l.(interface{ SetDeadline(time.Time) error }); ok {
			_ = d.SetDeadline(time.Unix(1, 0))
		}
		ls = append(ls, l)
	}
	return ls
}

// ResumeAccepting undoes StopAccepting.
func (s *Server) ResumeAccepting() {
	s.accept.mu.Lock()
	defer s.accept.mu.Unlock()
	if !s.accept.paused {
		return
	}
	s.accept.paused = false
	s.mu.Lock()
	for l := range s.listeners {
		if d, ok := l.(interface{ SetDeadline(time.Time) error }); ok {
			_ = d.SetDeadline(time.Time{})
		}
	}
	s.mu.Unlock()
	close(s.accept.resumed)
}

// acceptPaused waits while accepting is stopped; false when the server
// closed meanwhile. Serve calls it after an Accept error.
func (s *Server) acceptPaused() (waited bool) {
	s.accept.mu.Lock()
	paused, ch := s.accept.paused, s.accept.resumed
	s.accept.mu.Unlock()
	if !paused {
		return false
	}
	select {
	case <-ch:
	case <-s.ctx.Done():
	}
	return true
}

// SetUpgrade sets ServerOptions.Upgrade (its runner needs the server).
func (s *Server) SetUpgrade(f func(ctx context.Context, p api.UpgradeParams) (api.UpgradeResult, error)) {
	s.o.Upgrade = f
}

// Caller returns the connection that called daemon.upgrade, from the
// handler's context.
func Caller(ctx context.Context) (UpgradeCaller, bool) {
	c, ok := ctx.Value(callerKey).(UpgradeCaller)
	return c, ok
}

func hUpgrade(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
	var p api.UpgradeParams
	if err := decodeValid(params, &p); err != nil {
		return nil, err
	}
	if c.srv.o.Upgrade == nil {
		return nil, api.Errorf(api.KindUpgradeRefused, map[string]any{"cause": "this daemon cannot upgrade"}, "upgrade refused")
	}
	return c.srv.o.Upgrade(ctx, p)
}

// withCaller adds the calling connection to a daemon.upgrade's ctx.
func (c *conn) withCaller(ctx context.Context, id *requestID) context.Context {
	uc, _ := c.st.conn.(*net.UnixConn)
	var raw json.RawMessage
	if id != nil {
		raw = appendID(nil, id)
	}
	return context.WithValue(ctx, callerKey, UpgradeCaller{Conn: uc, Framing: c.framing, ID: raw})
}
