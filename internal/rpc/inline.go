package rpc

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/sessiond/sessiond/internal/api"
)

// A slow method's call that need not wait (a hold or a release of a live
// session whose lock is free: api.InlineBackend) is answered on the
// connection's reading goroutine, as a fast method's is, instead of being
// handed to its queue's worker and back (two goroutine hops, most of
// what such a call cost beyond the echo of its reply). Only when nothing
// of this connection is queued, so the calls it sent before are all
// answered and the order of its calls holds; and only while calls are
// let in (not during an upgrade's pause). Otherwise, or when the backend
// would wait, the call is queued as before.

// answerNow answers the call of m (id) with now if it can; false: it did
// not, and the call is to be queued. The caller counted the call in
// c.handlers and ends it when this answered it.
func (c *conn) answerNow(ctx context.Context, m method, id *requestID, now nowFunc) bool {
	if ctx.Err() != nil || !c.queueIdle() || !c.srv.gate.tryEnter() {
		return false
	}
	res, ok, err := c.callNow(m, now)
	c.srv.gate.leave()
	if !ok {
		return false
	}
	c.srv.stats.answeredInline.Add(1)
	c.reply(ctx, m.name, id, res, err)
	return true
}

// callNow runs now; a panic is answered -32603, as one in a handler.
func (c *conn) callNow(m method, now nowFunc) (res any, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked", "method", m.name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res, ok, err = nil, true, api.Errorf(api.KindInternal, nil, "internal error in %s", m.name)
		}
	}()
	return now(c)
}

// queueIdle reports whether none of c's calls is queued or running in a
// queue. Only the reading goroutine queues calls, so it stays true until
// that goroutine queues one.
func (c *conn) queueIdle() bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.qcalls == 0
}

// tryEnter is enter without waiting: false while calls are held.
func (g *callGate) tryEnter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused {
		return false
	}
	g.inflight++
	return true
}
