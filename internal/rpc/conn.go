package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// conn is one accepted, framed connection.
//
// Lock order: conn.mu and conn.qmu are never held together, nor while
// calling the Backend or writing.
type conn struct {
	srv     *Server
	id      string
	framing Framing
	log     *slog.Logger
	st      *stream         // replies and notifications are written here directly
	ctx     context.Context // cancelled when the connection closes
	cancel  context.CancelFunc

	done chan struct{} // closed once reading has ended

	mu          sync.Mutex
	initialized bool
	caps        map[string]bool
	origin      *event.Origin  // who this connection is (initialize's client), stamped on its inputs
	attnQueue   [][]byte       // daemon.attention notices not yet written (attention.go)
	attnWriting bool           // an attention writer runs
	attnShed    bool           // closed for not reading them
	closing     bool           // no new handler or pump may start
	handlers    sync.WaitGroup // every request handler running or queued
	pumps       sync.WaitGroup // every subscription pump

	qmu      sync.Mutex               // guards the queues (queue.go)
	queues   map[string]*sessionQueue // by sessionId; present while not empty
	qcalls   int                      // calls queued or running
	qbytes   int                      // their params' bytes
	qidle    chan struct{}            // closed when qcalls drops to 0; nil while it is 0
	qrefused bool                     // a call was refused (logged once)
}

// handle answers one request; it runs on the reading goroutine and never
// waits for a call that can wait. Requests before initialize is
// answered, refusals and fast methods are answered inline, so in order; a
// slow method (one that can wait on a session) goes to its session's
// queue (queue.go). nullID: the request's id was null, and so is the
// answer's.
func (c *conn) handle(req *request, nullID bool) {
	ctx := c.ctx
	if req.Notif {
		c.log.Debug("notification ignored", "method", req.Method)
		return
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
		return
	}
	c.handlers.Add(1)
	c.mu.Unlock()

	id := &req.ID
	if nullID {
		id = nil
	}
	if gateErr != nil {
		defer c.handlers.Done()
		c.reply(ctx, req.Method, id, nil, gateErr)
		return
	}
	params := req.Params
	var key string
	var queued callFunc
	var now nowFunc
	if m.slow {
		key, queued, now = c.prepare(m, params) // its params decoded now, once (queued.go)
	}
	run := func() {
		defer c.handlers.Done()
		if ctx.Err() != nil {
			return // closed while queued: nobody to answer, nothing to do
		}
		ctx := ctx
		counted := false
		if m.name == methodUpgrade {
			ctx = c.withCaller(ctx, id) // not counted: it waits for the others
			c.srv.upg.add(1)
			defer c.srv.upg.add(-1) // once answered
		} else if !c.srv.gate.enter(ctx) {
			return // held by an upgrade, then closed
		} else {
			counted = true
		}
		res, err := c.call(ctx, m, params, queued)
		if counted {
			// The backend's work is done: an upgrade need not wait for the
			// reply's write (a peer that stops reading would hold it for
			// write_timeout); it seals the stream after the frame instead.
			c.srv.gate.leave()
		}
		c.reply(ctx, req.Method, id, res, err)
	}
	if !m.slow {
		run()
		return
	}
	if now != nil && c.answerNow(ctx, m, id, now) {
		c.handlers.Done()
		return
	}
	if err := c.enqueue(key, len(params), run); err != nil {
		defer c.handlers.Done()
		c.reply(ctx, req.Method, id, nil, err)
	}
}

// replyBadID answers a request whose id is neither a string nor an
// integer: -32600 with id null (JSON-RPC 2.0's answer when the id cannot
// be echoed); the connection goes on.
func (c *conn) replyBadID() {
	c.srv.stats.rpc("(invalid)")
	c.reply(c.ctx, "(invalid)", nil, nil, errInvalidID())
}

// replyInvalid answers valid JSON that is no request (why says what is
// wrong): -32600 with id null; the connection goes on.
func (c *conn) replyInvalid(why string) {
	c.srv.stats.rpc("(invalid)")
	c.log.Info("invalid request", "reason", "invalid_request", "detail", why)
	c.reply(c.ctx, "(invalid)", nil, nil, &protoError{CodeInvalidRequest, "invalid_request", "invalid request: " + why, nil})
}

// call runs one handler (queued: a slow method's prepared call), turning
// a panic into -32603.
func (c *conn) call(ctx context.Context, m method, params json.RawMessage, queued callFunc) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked", "method", m.name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res, err = nil, api.Errorf(api.KindInternal, nil, "internal error in %s", m.name)
		}
	}()
	if queued != nil {
		return queued(ctx, c)
	}
	return m.handle(ctx, c, params)
}

// reply answers the request of method with id (nil: id null).
func (c *conn) reply(ctx context.Context, method string, id *requestID, res any, err error) {
	var then, release func()
	if r, ok := res.(rawResult); ok && r.release != nil {
		release = sync.OnceFunc(r.release)
		defer release() // if the reply is dropped before it is counted
	}
	var we *errorObject
	if err != nil {
		we = toWire(err)
		lvl := slog.LevelInfo
		if we.Code == CodeInternal {
			lvl = slog.LevelError
		}
		c.srv.stats.errored(reasonOf(we))
		c.log.Log(ctx, lvl, "rpc error", "method", method, "id", idString(id), "code", we.Code,
			"reason", reasonOf(we), "err", err.Error())
	} else if ar, ok := res.(*afterReply); ok {
		res, then = ar.result, ar.then
	}
	if r, ok := res.(rawResult); ok && r.pooled {
		defer recycle(r.buf) // written or dropped when writeResponse returns
	}
	if err = c.writeResponse(id, res, we, release); err != nil {
		c.log.Debug("reply not written", "method", method, "err", err.Error())
		return
	}
	if then != nil {
		then()
	}
}

// writeResponse encodes a response once (see reply.go) and writes it to
// the stream, unless the connection is already closed (as jsonrpc2's
// Reply would refuse it); counted (may be nil) runs once it is counted in
// the outbound budget.
func (c *conn) writeResponse(id *requestID, res any, we *errorObject, counted func()) error {
	select {
	case <-c.done:
		return jsonrpc2.ErrClosed
	case <-c.st.closedCh:
		return jsonrpc2.ErrClosed
	default:
	}
	b, err := encodeResponse(id, res, we)
	if err != nil {
		return err
	}
	return c.st.writeCounted(b, counted)
}

func idString(id *requestID) string {
	if id == nil {
		return "null"
	}
	return id.String()
}

func reasonOf(e *errorObject) string {
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
	if c.st.dl != nil {
		c.st.dl.initBy = time.Time{} // admit.go's initialize deadline
	}
	c.caps = map[string]bool{}
	negotiated := []string{}
	for _, cp := range p.Capabilities {
		if slices.Contains(Capabilities, cp) && !c.caps[cp] {
			c.caps[cp] = true
			negotiated = append(negotiated, cp)
		}
	}
	c.origin = &event.Origin{Client: p.Client.Name, ConnectionID: c.id, Device: p.Client.Device}
	c.log.Info("client initialized", "client", p.Client.Name, "client_version", p.Client.Version,
		"client_device", p.Client.Device, "capabilities", negotiated)
	return InitializeResult{
		ProtocolVersion: api.ProtocolVersion,
		Server:          ClientInfo{Name: "sessiond", Version: c.srv.o.Version},
		Capabilities:    Capabilities,
		Negotiated:      negotiated,
		ConnectionID:    c.id,
	}
}

// originOf is the origin of this connection's inputs (nil before initialize).
func (c *conn) originOf() *event.Origin {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.origin
}

func (c *conn) has(capability string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps[capability]
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
