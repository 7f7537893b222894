package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/sessiond/sessiond/internal/api"
)

func hInitialize(_ context.Context, c *conn, params json.RawMessage) (any, error) {
	var p InitializeParams
	if err := decodeValid(params, &p); err != nil {
		return nil, err
	}
	if *p.ProtocolVersion != api.ProtocolVersion {
		return nil, api.Errorf(api.KindUnsupportedProtocol, map[string]any{"supported": []int{api.ProtocolVersion}},
			"protocol version %d is not supported", *p.ProtocolVersion)
	}
	return c.initialize(p), nil
}

func hStatus(_ context.Context, c *conn, _ json.RawMessage) (any, error) {
	s := c.srv
	var runtimes []byte
	if rb, ok := s.o.Backend.(runtimeLister); ok && c.has(api.CapRuntimes) {
		list := rb.Runtimes()
		if list == nil {
			list = []api.RuntimeInfo{}
		}
		b, err := json.Marshal(list)
		if err != nil {
			return nil, fmt.Errorf("daemon.status: runtimes: %w", err)
		}
		runtimes = append([]byte(`,"runtimes":`), b...)
	}
	return s.encodeStatusWith(s.o.Backend.Counts(), s.openConns(), s.o.Backend.Providers(), runtimes), nil // status.go
}

// hDiscover answers the OpenRPC document (openrpc.go).
func hDiscover(_ context.Context, _ *conn, _ json.RawMessage) (any, error) {
	return json.RawMessage(openrpcDoc()), nil
}

// openrpcDoc is OpenRPC, set in init: the document is built from the
// method table, which names hDiscover.
var openrpcDoc func() []byte

func init() { openrpcDoc = OpenRPC }

func hStats(_ context.Context, c *conn, _ json.RawMessage) (any, error) {
	out := map[string]any{}
	for k, v := range c.srv.o.Backend.Stats() {
		out[k] = v
	}
	for k, v := range c.srv.stats.snapshot(c.srv.openConns()) {
		out[k] = v
	}
	return out, nil
}

func hShutdown(_ context.Context, c *conn, _ json.RawMessage) (any, error) {
	c.srv.log.Info("shutdown requested", "conn_id", c.id)
	return &afterReply{result: struct{}{}, then: func() {
		if c.srv.o.OnShutdown != nil {
			go c.srv.o.OnShutdown() // it may close this server, which waits for this handler
		}
	}}, nil
}

func hCreate(ctx context.Context, c *conn, p *api.CreateParams) (any, error) {
	return c.srv.o.Backend.Create(ctx, *p)
}

func sessionParams(params json.RawMessage) (api.SessionParams, error) {
	var p api.SessionParams
	return p, decodeValid(params, &p)
}

func hGet(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
	p, err := sessionParams(params)
	if err != nil {
		return nil, err
	}
	return c.srv.o.Backend.Get(ctx, p.SessionID)
}

func hDelete(ctx context.Context, c *conn, p *api.SessionParams) (any, error) {
	return struct{}{}, c.srv.o.Backend.Delete(ctx, p.SessionID)
}

func hHold(ctx context.Context, c *conn, p *api.HoldParams) (any, error) {
	return c.srv.o.Backend.Hold(ctx, c.id, *p)
}

func hRelease(ctx context.Context, c *conn, p *api.ReleaseParams) (any, error) {
	return c.srv.o.Backend.Release(ctx, c.id, *p)
}

// nowHold and nowRelease answer a hold or a release without waiting
// when the backend can (api.InlineBackend; inline.go).
var (
	nowHold    = inlineNow(api.InlineBackend.HoldNow)
	nowRelease = inlineNow(api.InlineBackend.ReleaseNow)
)

// inlineNow is the queued method's now of an api.InlineBackend method:
// ok false (queue it) when the backend is not one.
func inlineNow[P, R any](f func(api.InlineBackend, string, P) (R, bool, error)) func(c *conn, p *P) (any, bool, error) {
	return func(c *conn, p *P) (any, bool, error) {
		ib, ok := c.srv.o.Backend.(api.InlineBackend)
		if !ok {
			return nil, false, nil
		}
		res, ok, err := f(ib, c.id, *p)
		if !ok || err != nil {
			return nil, ok, err
		}
		return res, true, nil
	}
}

func hClose(ctx context.Context, c *conn, p *api.SessionParams) (any, error) {
	r, err := c.srv.o.Backend.Close(ctx, p.SessionID)
	if err == nil && r.Steps == nil {
		r.Steps = []api.StepResult{}
	}
	return r, err
}

func hAttach(ctx context.Context, c *conn, p *api.AttachParams) (any, error) {
	legacy := !c.has(api.CapStructuredHold)
	r, sub, err := c.srv.o.Backend.Attach(ctx, c.id, *p, legacy)
	if err != nil {
		return nil, err
	}
	r.Events, r.HasMore, err = c.visiblePage(ctx, p.SessionID, r.Events, r.HasMore, r.LastSeq, p.Limit)
	var raw rawResult
	if err == nil {
		raw, err = encodeAttach(r)
	}
	if err != nil {
		if sub != nil {
			sub.Abandon() // never pumped: the attach leaves nothing
		}
		return nil, err
	}
	return &afterReply{result: raw, then: func() { c.startPump(sub, r.LastSeq) }}, nil
}

func hRead(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
	var p api.ReadParams
	if err := decodeValid(params, &p); err != nil {
		return nil, err
	}
	r, err := c.srv.o.Backend.Read(ctx, p)
	if err != nil {
		return nil, err
	}
	if r.Events, r.HasMore, err = c.visiblePage(ctx, p.SessionID, r.Events, r.HasMore, math.MaxUint64, p.Limit); err != nil {
		return nil, err
	}
	return encodeRead(r)
}

func hDetach(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
	var p api.DetachParams
	if err := decodeValid(params, &p); err != nil {
		return nil, err
	}
	return struct{}{}, c.srv.o.Backend.Detach(ctx, c.id, p.SubscriptionID)
}

func hSend(ctx context.Context, c *conn, p *api.SendParams) (any, error) {
	p.Origin = c.originOf()
	return c.srv.o.Backend.Send(ctx, *p)
}

func hCancel(ctx context.Context, c *conn, p *api.SessionParams) (any, error) {
	return c.srv.o.Backend.Cancel(ctx, p.SessionID)
}

func hRespond(ctx context.Context, c *conn, p *api.RespondParams) (any, error) {
	if !c.has(api.CapApprovalsV2) {
		if err := p.CheckV1Decision(); err != nil {
			return nil, err
		}
	}
	p.Origin = c.originOf()
	return struct{}{}, c.srv.o.Backend.Respond(ctx, *p)
}

// supervision is the status's supervision with its lists never null.
func supervision(s api.Supervision) api.Supervision {
	if s.Mode == "" {
		s.Mode, s.Reason = "fallback", "not configured"
	}
	if s.Controllers == nil {
		s.Controllers = []string{}
	}
	return s
}
