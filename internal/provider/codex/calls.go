package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/internal/provider"
)

// call is one of our requests waiting for its response.
type call struct {
	method string
	// onResult, when set, runs on the reader goroutine as the response is
	// read, before any later line is handled (turn/start binds ids here).
	onResult func(result json.RawMessage, rerr *RPCError)
	resp     chan *message // buffered 1
}

// request sends method and waits for its response, ctx, the request timeout,
// BeginStop or the provider's exit. An error response comes back as *RPCError.
func (a *Adapter) request(ctx context.Context, method string, params any, onResult func(json.RawMessage, *RPCError)) (json.RawMessage, error) {
	return a.requestWithin(ctx, a.o.RequestTimeout, method, params, onResult)
}

// requestWithin is request waiting at most within for the response (0:
// as long as ctx lets it).
func (a *Adapter) requestWithin(ctx context.Context, within time.Duration, method string, params any,
	onResult func(json.RawMessage, *RPCError)) (json.RawMessage, error) {
	c := &call{method: method, onResult: onResult, resp: make(chan *message, 1)}
	a.mu.Lock()
	var id int64
	if a.rt != nil {
		id = a.rt.nextID(a) // one id space per runtime; the response comes back to a
	} else {
		a.nextID++
		id = a.nextID
	}
	key := strconv.FormatInt(id, 10)
	a.calls[key] = c
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.calls, key)
		a.mu.Unlock()
		if a.rt != nil {
			a.rt.forgetID(id) // answered or abandoned: the id leaves the runtime's space
		}
	}()
	select {
	case <-a.done:
		return nil, fmt.Errorf("provider: %s: %w", method, ErrExited)
	default:
	}
	if err := a.write(outRequest{ID: id, Method: method, Params: params}); err != nil {
		return nil, fmt.Errorf("provider: %s: %w", method, err)
	}
	timeout, stop := provider.Timer(within)
	defer stop()
	select {
	case m := <-c.resp:
		if m.Error != nil {
			return nil, fmt.Errorf("provider: %s: %w", method, m.Error)
		}
		return m.Result, nil
	case <-a.done:
		// The response may have been read just before the reader stopped.
		select {
		case m := <-c.resp:
			if m.Error != nil {
				return nil, fmt.Errorf("provider: %s: %w", method, m.Error)
			}
			return m.Result, nil
		default:
		}
		return nil, fmt.Errorf("provider: %s: %w", method, ErrExited)
	case <-a.stopping:
		select {
		case m := <-c.resp: // answered just before
			if m.Error != nil {
				return nil, fmt.Errorf("provider: %s: %w", method, m.Error)
			}
			return m.Result, nil
		default:
		}
		return nil, fmt.Errorf("provider: %s: %w", method, ErrStopping)
	case <-timeout:
		return nil, fmt.Errorf("provider: %s after %s: %w", method, within.Round(time.Millisecond), ErrTimeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("provider: %s: %w", method, context.Cause(ctx))
	}
}

// notify sends a notification (no response).
func (a *Adapter) notify(method string, params any) error {
	if err := a.write(outNotification{Method: method, Params: params}); err != nil {
		return fmt.Errorf("provider: %s: %w", method, err)
	}
	return nil
}

// handleResponse routes a response to its waiting call (reader goroutine).
func (a *Adapter) handleResponse(m *message) {
	key, _ := provider.RequestKey(m.ID) // ours are numbers: a string "1" is not our 1
	a.mu.Lock()
	c, ok := a.calls[key]
	delete(a.calls, key)
	a.mu.Unlock()
	if !ok {
		a.anomaly("response_unknown_id", "id", key)
		return
	}
	if c.onResult != nil {
		c.onResult(m.Result, m.Error)
	}
	c.resp <- m
}
