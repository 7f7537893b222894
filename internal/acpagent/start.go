package acpagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/autostart"
	"github.com/sessiond/sessiond/internal/rpc"
)

// reconnectWait bounds how long the bridge tries to reach a daemon again
// after losing its connection (a restart, a crash, a live upgrade);
// past it every pending request fails and the bridge exits.
const reconnectWait = 30 * time.Second

// errDaemonGone: the daemon's connection was lost and no daemon could be
// reached again within reconnectWait.
var errDaemonGone = errors.New("the daemon is gone and could not be reached again")

// dialDaemon connects to the daemon at f.socket, starting `sessiond serve`
// (this binary, detached, with the flags the bridge was given and its
// environment) when nobody accepts there: package autostart, the start
// path `sessiond proxy` takes too, so front doors started together start
// one daemon between them.
func dialDaemon(ctx context.Context, f flags, o rpc.ClientOptions) (*rpc.Client, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start the daemon: %w", err)
	}
	conn, err := autostart.Connect(ctx, autostart.Flags{Socket: f.socket, StateDir: f.stateDir, Config: f.config}, exe)
	if err != nil {
		return nil, err
	}
	return rpc.DialConn(ctx, conn, o)
}

// link is one connection to the daemon: c is set when ready is closed,
// replaced closes when another link took its place.
type link struct {
	c        *rpc.Client
	ready    chan struct{}
	replaced chan struct{}
}

// daemonLink is the bridge's current connection, replaced when it is
// lost: the editor's sessions outlive a daemon restart.
type daemonLink struct {
	mu   sync.Mutex
	cur  *link
	dead chan struct{} // closed when reconnecting gave up
	err  error         // why, set before dead closes
}

func newDaemonLink(c *rpc.Client) *daemonLink {
	l := &link{c: c, ready: make(chan struct{}), replaced: make(chan struct{})}
	close(l.ready)
	return &daemonLink{cur: l, dead: make(chan struct{})}
}

// client waits for a live connection (while a reconnect runs) and
// returns it; errDaemonGone once reconnecting gave up.
func (d *daemonLink) client(ctx context.Context) (*rpc.Client, error) {
	for {
		d.mu.Lock()
		l := d.cur
		d.mu.Unlock()
		select {
		case <-l.ready:
		case <-d.dead:
			return nil, d.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-l.c.Done(): // lost: wait for the link that replaces it
		default:
			return l.c, nil
		}
		select {
		case <-l.replaced:
		case <-d.dead:
			return nil, d.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// current is the ready link's client without waiting: nil while a
// reconnect runs or after one was abandoned (the bridge is ending).
func (d *daemonLink) current() *rpc.Client {
	d.mu.Lock()
	l := d.cur
	d.mu.Unlock()
	select {
	case <-l.ready:
		return l.c
	default:
		return nil
	}
}

// lostConn reports whether err is the daemon's connection closing under
// a call (the call may or may not have reached the daemon).
func lostConn(err error) bool { return errors.Is(err, jsonrpc2.ErrClosed) }

// call is Client.Call on the current connection.
func (b *bridge) call(ctx context.Context, method string, params, result any) error {
	c, err := b.d.client(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return c.Call(ctx, method, params, result)
}

// supervise waits for the daemon's connection to end and dials again
// (starting a daemon when none runs), re-holds every open session and
// has each catch up from its journal where it left off: a turn the
// daemon's restart interrupted ends as its journal says (cancelled), the
// next prompt runs in a fresh provider child. When no daemon can be
// reached within reconnectWait it gives up: dead closes.
func (b *bridge) supervise(ctx context.Context, o rpc.ClientOptions) {
	for {
		b.d.mu.Lock()
		l := b.d.cur
		b.d.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-l.c.Done():
		}
		if ctx.Err() != nil {
			return
		}
		next := &link{ready: make(chan struct{}), replaced: make(chan struct{})}
		b.d.mu.Lock()
		b.d.cur = next
		b.d.mu.Unlock()
		close(l.replaced)
		b.logf("the daemon closed the connection: reconnecting to %s", b.f.socket)
		c, err := b.redial(ctx, o)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.d.err = fmt.Errorf("%w within %s: %w", errDaemonGone, reconnectWait, err)
			b.logf("%v: every pending request fails and the bridge exits", b.d.err)
			close(b.d.dead)
			return
		}
		n := b.reholdAll(ctx, c) // before any caller sees c: a prompt retried on it finds its session live
		next.c = c
		close(next.ready)
		b.logf("reconnected to %s: re-held %d session(s)", b.f.socket, n)
	}
}

// redial dials until a daemon accepts or reconnectWait passes.
func (b *bridge) redial(ctx context.Context, o rpc.ClientOptions) (*rpc.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, reconnectWait)
	defer cancel()
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		c, err := dialDaemon(ctx, b.f, o)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
	}
}

// reholdAll holds every open session again on the new connection c and
// has its feed catch up from the journal; it returns how many.
func (b *bridge) reholdAll(ctx context.Context, c *rpc.Client) int {
	b.mu.Lock()
	ss := make([]*session, 0, len(b.sessions))
	for _, s := range b.sessions {
		ss = append(ss, s)
	}
	b.mu.Unlock()
	for _, s := range ss {
		var h api.HoldResult
		if err := c.Call(ctx, "agentSession.hold", b.holdParams(s.id), &h); err != nil {
			b.logf("session %s: hold again: %v", s.id, err)
		} else {
			s.mu.Lock()
			s.holdToken = h.HoldToken
			s.mu.Unlock()
		}
		s.resyncFeed("the daemon connection was replaced")
	}
	return len(ss)
}
