package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
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
	Caps    []string // negotiated at its initialize

	unread func() []byte
}

// Unread returns a copy of the bytes read from the caller's connection and
// not yet parsed. daemon.upgrade runs on its connection's reading
// goroutine, so nothing after the call is parsed while it runs; call it
// from the handler.
func (u UpgradeCaller) Unread() []byte {
	if u.unread == nil {
		return nil
	}
	return u.unread()
}

// AdoptedCaller is the previous image's daemon.upgrade caller, as the
// handoff carries it: the new image serves its connection as one it
// initialized itself, with the same capabilities, after writing Result
// as the call's answer (AdoptCaller).
type AdoptedCaller struct {
	Framing Framing
	Caps    []string
	ID      json.RawMessage
	Result  any
	Unread  []byte // read by the previous image, not parsed: read first
}

// ErrAdoptCaller means a handed-over caller cannot be served.
var ErrAdoptCaller = errors.New("cannot serve the upgrade's caller")

// adoptedCaller is AdoptedCaller, checked, for serveConnAs.
type adoptedCaller struct {
	framing Framing
	caps    []string
	id      requestID
	result  any
	unread  []byte
}

// AdoptCaller serves nc, the connection that called daemon.upgrade in the
// previous image, like an accepted one that is already initialized with
// a.Caps (those this server knows): its first frame is the answer, and it
// stays open. The holds and subscriptions it had ended with the previous
// image.
func (s *Server) AdoptCaller(nc net.Conn, a AdoptedCaller) error {
	ad := &adoptedCaller{framing: a.Framing, result: a.Result, unread: a.Unread}
	if err := ad.id.unmarshal(a.ID); err != nil {
		nc.Close()
		return fmt.Errorf("%w: id %s: %w", ErrAdoptCaller, api.Prefix(string(a.ID)), err)
	}
	for _, cp := range a.Caps {
		if slices.Contains(Capabilities, cp) && !slices.Contains(ad.caps, cp) {
			ad.caps = append(ad.caps, cp)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return fmt.Errorf("%w: the server is closed", ErrAdoptCaller)
	}
	s.conns[nc] = nil
	s.wg.Add(1)
	s.mu.Unlock()
	s.stats.connsTotal.Add(1)
	go func() {
		defer s.wg.Done()
		s.serveConnAs(nc, ad)
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}()
	return nil
}

// start makes c initialized with the caller's capabilities and writes
// the answer, before c reads anything.
func (ad *adoptedCaller) start(c *conn) {
	c.mu.Lock()
	c.initialized = true
	c.caps = map[string]bool{}
	for _, cp := range ad.caps {
		c.caps[cp] = true
	}
	c.mu.Unlock()
	c.log.Info("upgrade caller served on", "capabilities", ad.caps, "unread_bytes", len(ad.unread))
	if err := c.writeResponse(&ad.id, ad.result, nil, nil); err != nil {
		c.log.Warn("upgrade: could not answer the caller", "err", err.Error())
	}
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
	c.mu.Lock()
	caps := make([]string, 0, len(c.caps))
	for cp := range c.caps {
		caps = append(caps, cp)
	}
	c.mu.Unlock()
	slices.Sort(caps)
	br := c.st.br
	unread := func() []byte {
		b, _ := br.Peek(br.Buffered())
		return bytes.Clone(b)
	}
	return context.WithValue(ctx, callerKey, UpgradeCaller{Conn: uc, Framing: c.framing, ID: raw, Caps: caps, unread: unread})
}
