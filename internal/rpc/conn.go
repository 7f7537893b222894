package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/sessiond/sessiond/internal/api"
)

// conn is one accepted, framed connection.
//
// Lock order: conn.mu only; never held while calling the Backend or writing.
type conn struct {
	srv     *Server
	id      string
	framing Framing
	log     *slog.Logger
	st      *stream         // replies and notifications are written here directly
	ctx     context.Context // cancelled when the connection closes
	cancel  context.CancelFunc

	done      chan struct{} // closed once reading has ended
	closeOnce sync.Once

	mu          sync.Mutex
	initialized bool
	caps        map[string]bool
	closing     bool           // no new handler or pump may start
	handlers    sync.WaitGroup // every running request handler
	pumps       sync.WaitGroup // every subscription pump
}

// handle answers one request. It runs on the reading goroutine: requests
// before initialize is answered, and fast methods, are answered inline and
// so in order; a slow method runs inline too, but reading moves to another
// goroutine if it takes longer than handoffAfter (handedOff: the caller
// must stop reading).
func (c *conn) handle(req *jsonrpc2.Request) (handedOff bool) {
	ctx := c.ctx
	if req.Notif {
		c.log.Debug("notification ignored", "method", req.Method)
		return false
	}
	c.mu.Lock()
	inited := c.initialized
	m, known := c.srv.table[req.Method]
	if known {
		c.srv.stats.rpc(req.Method)
	} else {
		c.srv.stats.rpc("(unknown)") // a client's names must not grow the map
	}
	var gateErr error
	switch {
	case req.Method == "initialize" && inited:
		gateErr = errAlreadyInitialized()
	case req.Method == "initialize":
	case !inited:
		gateErr = api.Errorf(api.KindNotInitialized, nil, "%s before initialize", req.Method)
	case !known:
		gateErr = errMethodNotFound(req.Method)
	case m.capability != "" && !c.caps[m.capability]:
		gateErr = errCapability(req.Method, m.capability)
	}
	if c.closing {
		c.mu.Unlock()
		return false
	}
	c.handlers.Add(1)
	c.mu.Unlock()

	run := func() {
		defer c.handlers.Done()
		if gateErr != nil {
			c.reply(ctx, req, nil, gateErr)
			return
		}
		res, err := c.call(ctx, m, req)
		c.reply(ctx, req, res, err)
	}
	if gateErr == nil && inited && m.slow {
		return c.runInline(run)
	}
	run()
	return false
}

// call runs one handler, turning a panic into -32603.
func (c *conn) call(ctx context.Context, m method, req *jsonrpc2.Request) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked", "method", m.name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res, err = nil, api.Errorf(api.KindInternal, nil, "internal error in %s", m.name)
		}
	}()
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	return m.handle(ctx, c, params)
}

func (c *conn) reply(ctx context.Context, req *jsonrpc2.Request, res any, err error) {
	var then func()
	var we *jsonrpc2.Error
	if err != nil {
		we = toWire(err)
		lvl := slog.LevelInfo
		if we.Code == CodeInternal {
			lvl = slog.LevelError
		}
		c.srv.stats.errored(reasonOf(we))
		c.log.Log(ctx, lvl, "rpc error", "method", req.Method, "id", req.ID.String(), "code", we.Code,
			"reason", reasonOf(we), "err", err.Error())
	} else if ar, ok := res.(*afterReply); ok {
		res, then = ar.result, ar.then
	}
	if err = c.writeResponse(req.ID, res, we); err != nil {
		c.log.Debug("reply not written", "method", req.Method, "err", err.Error())
		return
	}
	if then != nil {
		then()
	}
}

// writeResponse encodes a response once (see reply.go) and writes it to
// the stream, unless the connection is already closed (as jsonrpc2's
// Reply would refuse it).
func (c *conn) writeResponse(id jsonrpc2.ID, res any, we *jsonrpc2.Error) error {
	select {
	case <-c.done:
		return jsonrpc2.ErrClosed
	default:
	}
	b, err := encodeResponse(id, res, we)
	if err != nil {
		return err
	}
	return c.st.writeOwned(b)
}

func reasonOf(e *jsonrpc2.Error) string {
	var d struct {
		Reason string `json:"reason"`
	}
	if e.Data != nil {
		json.Unmarshal(*e.Data, &d)
	}
	return d.Reason
}

// initialize negotiates client ∩ server capabilities.
func (c *conn) initialize(p InitializeParams) InitializeResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.initialized = true
	c.caps = map[string]bool{}
	var negotiated []string
	for _, cp := range p.Capabilities {
		if slices.Contains(Capabilities, cp) && !c.caps[cp] {
			c.caps[cp] = true
			negotiated = append(negotiated, cp)
		}
	}
	c.log.Info("client initialized", "client", p.Client.Name, "client_version", p.Client.Version,
		"capabilities", negotiated)
	return InitializeResult{
		ProtocolVersion: api.ProtocolVersion,
		Server:          ClientInfo{Name: "sessiond", Version: c.srv.o.Version},
		Capabilities:    Capabilities,
		ConnectionID:    c.id,
	}
}

func (c *conn) has(capability string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps[capability]
}

// notification is a JSON-RPC notification as written on the wire.
type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// notify sends a notification if its capability was negotiated. It is
// marshalled once and written straight to the stream (whose writes are
// serialised and carry the write deadline): jsonrpc2.Notify would marshal
// it three times.
func (c *conn) notify(method string, params any) error {
	if capa := notifyCaps[method]; capa != "" && !c.has(capa) {
		return nil
	}
	b, err := json.Marshal(notification{JSONRPC: "2.0", Method: method, Params: params})
	if err != nil {
		return err
	}
	return c.st.writeBytes(b)
}

// notifyEvent is notify(NotifyEvent, n) with the event encoded by hand
// (see reply.go): the same bytes, no reflection.
func (c *conn) notifyEvent(n api.EventNotice) error {
	if !c.has(notifyCaps[NotifyEvent]) {
		return nil
	}
	b, err := encodeEventNotice(n)
	if err != nil {
		return err
	}
	return c.st.writeOwned(b)
}

// startPump forwards sub's events as notifications, after the attach reply.
func (c *conn) startPump(sub api.Subscription, lastSeq uint64) {
	if sub == nil {
		return
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return // ConnClosed ends the subscription
	}
	c.pumps.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.pumps.Done()
		defer func() {
			if r := recover(); r != nil {
				c.log.Error("subscription pump panicked; closing the connection", "subscription_id", sub.ID(),
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				c.st.Close()
			}
		}()
		c.pump(sub, lastSeq)
	}()
}

func (c *conn) pump(sub api.Subscription, last uint64) {
	for {
		ev, err := sub.Next(c.ctx)
		switch {
		case errors.Is(err, api.ErrLagged):
			c.srv.stats.lagged()
			c.log.Warn("subscriber lagged, detaching", "subscription_id", sub.ID(), "last_delivered_seq", last)
			if err := c.notify(NotifyLagged, api.LaggedNotice{SubscriptionID: sub.ID(), LastDeliveredSeq: last}); err != nil {
				c.log.Debug("lagged notice not written", "err", err.Error())
			}
			if err := c.srv.o.Backend.Detach(context.WithoutCancel(c.ctx), c.id, sub.ID()); err != nil {
				c.log.Debug("detach after lag", "subscription_id", sub.ID(), "err", err.Error())
			}
			return
		case err != nil:
			return
		}
		if !c.sees(ev.Type) {
			continue // the connection did not negotiate its capability
		}
		if err := c.notifyEvent(api.EventNotice{SubscriptionID: sub.ID(), Event: ev}); err != nil {
			return
		}
		last = ev.Seq
	}
}

// finish runs once after the connection closed: wait for its handlers,
// tell the Backend (exactly once), then wait for its pumps.
func (c *conn) finish() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.handlers.Wait()
	c.srv.o.Backend.ConnClosed(c.id)
	c.pumps.Wait()
}
