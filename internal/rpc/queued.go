package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/sessiond/sessiond/internal/api"
)

// A slow method's call waits in its session's queue (queue.go), so its
// params are decoded when the call is read, once, into the method's params
// type: the session they name keys the queue, and the handler gets them,
// validated, when the call runs. A fast method's handler decodes its
// params itself, inline (decodeValid).

// callFunc runs one prepared call.
type callFunc func(ctx context.Context, c *conn) (any, error)

// queuedFunc prepares a slow method's call from its params: the queue key,
// the call, and (nil for most) the call without waiting (nowFunc).
type queuedFunc func(params json.RawMessage) (key string, run callFunc, now nowFunc)

// nowFunc answers a slow method's call at once if it need not wait; ok
// false: it would, and the call is queued (inline.go).
type nowFunc func(c *conn) (res any, ok bool, err error)

// queued is the queuedFunc of h, a handler of decoded params P. Params
// that do not decode are answered invalid_params when the call runs, in
// its turn; their key is what queueKey finds in them.
func queued[P any, PP interface {
	*P
	validator
}](h func(ctx context.Context, c *conn, p PP) (any, error)) queuedFunc {
	return queuedNow[P, PP](h, nil)
}

// queuedNow is queued with now, the call answered without waiting when
// it can be (nil: always queued).
func queuedNow[P any, PP interface {
	*P
	validator
}](h func(ctx context.Context, c *conn, p PP) (any, error), now func(c *conn, p PP) (any, bool, error)) queuedFunc {
	return func(params json.RawMessage) (string, callFunc, nowFunc) {
		p := PP(new(P))
		if err := decode(params, p); err != nil {
			return queueKey(params), func(context.Context, *conn) (any, error) { return nil, err }, nil
		}
		key := sessionOf(p)
		if len(key) > maxKeyBytes {
			key = "" // its handler refuses it
		}
		run := func(ctx context.Context, c *conn) (any, error) {
			if err := p.Validate(); err != nil {
				return nil, err
			}
			return h(ctx, c, p)
		}
		if now == nil {
			return key, run, nil
		}
		return key, run, func(c *conn) (any, bool, error) {
			if err := p.Validate(); err != nil {
				return nil, true, err
			}
			return now(c, p)
		}
	}
}

// sessionOf is the session decoded params name: their sessionId ("" for
// create's, which name none).
func sessionOf(p any) string {
	switch p := p.(type) {
	case *api.SessionParams:
		return p.SessionID
	case *api.HoldParams:
		return p.SessionID
	case *api.ReleaseParams:
		return p.SessionID
	case *api.AttachParams:
		return p.SessionID
	case *api.SendParams:
		return p.SessionID
	case *api.RespondParams:
		return p.SessionID
	case *api.SwitchAccountParams:
		return p.SessionID
	}
	return ""
}

// prepare decodes a slow method's params (m.queued); a panic while
// decoding is answered -32603 when the call runs, as one in its handler.
func (c *conn) prepare(m method, params json.RawMessage) (key string, run callFunc, now nowFunc) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked", "method", m.name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			key, now, run = "", nil, func(context.Context, *conn) (any, error) {
				return nil, api.Errorf(api.KindInternal, nil, "internal error in %s", m.name)
			}
		}
	}()
	return m.queued(params)
}
