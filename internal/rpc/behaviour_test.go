package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestSlowMethodDoesNotStall: while a hold blocks in the backend, the same
// connection's other calls are answered.
func TestSlowMethodDoesNotStall(t *testing.T) {
	fake := newFake()
	release := make(chan struct{})
	entered := make(chan struct{})
	fake.holdHook = func(ctx context.Context) error {
		close(entered)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ts := startServer(t, fake, nil)
	for i, f := range framings {
		c := ts.client(t, f, nil, false)
		holdDone := make(chan error, 1)
		go func() {
			holdDone <- call(t, c, "agentSession.hold", api.HoldParams{SessionID: "s_aaaaaaaa", HolderID: "h"}, nil)
		}()
		wait(t, entered)
		var st Status
		if err := call(t, c, "daemon.status", nil, &st); err != nil {
			t.Fatalf("%v: status while hold blocks: %v", f, err)
		}
		close(release)
		if err := <-holdDone; err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			release, entered = make(chan struct{}), make(chan struct{})
		}
	}
}

// TestOrderedBeforeInitialize: requests before initialize is answered are
// answered in order (a pipelined client sees not_initialized, then the
// handshake, then results).
func TestOrderedBeforeInitialize(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	for _, f := range framings {
		r := ts.raw(t, f)
		r.send(`{"jsonrpc":"2.0","id":1,"method":"daemon.status"}`)
		r.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.structured.hold.v1"]}}`)
		r.send(`{"jsonrpc":"2.0","id":3,"method":"agentSession.list"}`)
		for want := 1.0; want <= 3; want++ {
			m := r.recv()
			if m["id"] != want {
				t.Fatalf("%v: got id %v, want %v (%v)", f, m["id"], want, m)
			}
		}
	}
}

func evs(from, to uint64) []event.Event {
	var out []event.Event
	for s := from; s <= to; s++ {
		out = append(out, event.Event{SessionID: "s_aaaaaaaa", Seq: s, Type: event.MessageDelta})
	}
	return out
}

// TestAttachReplyBeforeEvents: the attach reply is on the wire before any
// of its subscription's notifications, which follow in seq order.
func TestAttachReplyBeforeEvents(t *testing.T) {
	fake := newFake()
	// A big snapshot makes the reply slow to marshal, so a pump started
	// before the reply would win the race to the socket.
	snap := evs(1, 2000)
	for i := range snap {
		snap[i].Data = json.RawMessage(`{"text":"` + strings.Repeat("y", 512) + `"}`)
	}
	fake.attachHook = func(_ string, _ api.AttachParams, _ bool) (api.AttachResult, api.Subscription, error) {
		return api.AttachResult{SubscriptionID: "sub-1", LastSeq: 2000, Events: snap}, &fakeSub{id: "sub-1", evs: evs(2001, 2005)}, nil
	}
	ts := startServer(t, fake, nil)
	for _, f := range framings {
		r := ts.raw(t, f)
		r.initialize()
		r.send(`{"jsonrpc":"2.0","id":5,"method":"agentSession.attach","params":{"sessionId":"s_aaaaaaaa"}}`)
		if m := r.recv(); m["id"] != 5.0 || m["result"] == nil {
			t.Fatalf("%v: first message after attach = %v, want its reply", f, m)
		}
		for seq := 2001.0; seq <= 2005; seq++ {
			m := r.recv()
			p, _ := m["params"].(map[string]any)
			if m["method"] != NotifyEvent || p["subscriptionId"] != "sub-1" || p["event"].(map[string]any)["seq"] != seq {
				t.Fatalf("%v: got %v, want event seq %v", f, m, seq)
			}
		}
	}
}

// TestLagged: after the queued events, a lagged subscriber gets
// agentSession.lagged with the last seq written, and is detached.
func TestLagged(t *testing.T) {
	fake := newFake()
	fake.attachHook = func(_ string, _ api.AttachParams, _ bool) (api.AttachResult, api.Subscription, error) {
		return api.AttachResult{SubscriptionID: "sub-9", LastSeq: 10}, &fakeSub{id: "sub-9", evs: evs(11, 13), err: api.ErrLagged}, nil
	}
	ts := startServer(t, fake, nil)
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	c, err := Dial(t.Context(), ts.path, ClientOptions{OnNotify: func(method string, p json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, method+" "+string(p))
		if method == NotifyLagged {
			close(done)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := call(t, c, "agentSession.attach", api.AttachParams{SessionID: "s_aaaaaaaa"}, nil); err != nil {
		t.Fatal(err)
	}
	wait(t, done)
	if id := recv(t, fake.detached); id != "sub-9" {
		t.Fatalf("detached %s, want sub-9", id)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 4 || !strings.Contains(got[3], `"lastDeliveredSeq":13`) || !strings.Contains(got[2], `"seq":13`) {
		t.Fatalf("notifications = %q", got)
	}
}

// TestLegacyHold: attach without structured.hold.v1 is a legacy hold.
func TestLegacyHold(t *testing.T) {
	fake := newFake()
	legacy := make(chan bool, 2)
	fake.attachHook = func(_ string, _ api.AttachParams, l bool) (api.AttachResult, api.Subscription, error) {
		legacy <- l
		return api.AttachResult{SubscriptionID: "s"}, &fakeSub{id: "s"}, nil
	}
	ts := startServer(t, fake, nil)
	tests := []struct {
		caps []string
		want bool
	}{{[]string{api.CapAttach}, true}, {[]string{api.CapAttach, api.CapStructuredHold}, false}}
	for _, tc := range tests {
		c := ts.client(t, FramingLines, tc.caps, false)
		if err := call(t, c, "agentSession.attach", api.AttachParams{SessionID: "s_aaaaaaaa"}, nil); err != nil {
			t.Fatal(err)
		}
		if got := <-legacy; got != tc.want {
			t.Fatalf("caps %v: legacyHold = %v, want %v", tc.caps, got, tc.want)
		}
	}
}

// TestConnClosedOnce: every connection's ConnClosed runs exactly once, on
// client close and on server Close, after its in-flight handlers.
func TestConnClosedOnce(t *testing.T) {
	fake := newFake()
	entered := make(chan struct{}, 1)
	fake.holdHook = func(ctx context.Context) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	ts := startServer(t, fake, nil)
	a := ts.client(t, FramingLines, nil, false)
	go call(t, a, "agentSession.hold", api.HoldParams{SessionID: "s_aaaaaaaa", HolderID: "h"}, nil)
	wait(t, entered)
	a.Close()
	if id := recv(t, fake.closedCh); id != a.Init.ConnectionID {
		t.Fatalf("ConnClosed(%s), want %s", id, a.Init.ConnectionID)
	}
	b := ts.client(t, FramingHeader, nil, false)
	ts.srv.Close()
	wait(t, b.Done())
	if id := recv(t, fake.closedCh); id != b.Init.ConnectionID {
		t.Fatalf("ConnClosed(%s), want %s", id, b.Init.ConnectionID)
	}
	for _, id := range []string{a.Init.ConnectionID, b.Init.ConnectionID} {
		if n := fake.closedCount(id); n != 1 {
			t.Fatalf("ConnClosed(%s) ran %d times", id, n)
		}
	}
}

// floodSub hands out big events forever.
type floodSub struct{ seq uint64 }

func (s *floodSub) ID() string { return "flood" }
func (s *floodSub) Abandon()   {}
func (s *floodSub) Next(ctx context.Context) (event.Event, error) {
	if ctx.Err() != nil {
		return event.Event{}, api.ErrSubscriptionClosed
	}
	s.seq++
	data, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 16<<10)})
	return event.Event{Seq: s.seq, Type: event.MessageDelta, Data: data}, nil
}

// TestWriteTimeout: a peer that stops reading is closed after
// write_timeout and its connection is cleaned up.
func TestWriteTimeout(t *testing.T) {
	fake := newFake()
	fake.attachHook = func(string, api.AttachParams, bool) (api.AttachResult, api.Subscription, error) {
		return api.AttachResult{SubscriptionID: "flood"}, &floodSub{}, nil
	}
	ts := startServer(t, fake, func(o *ServerOptions) { o.WriteTimeout = 200 * time.Millisecond })
	r := ts.raw(t, FramingLines)
	r.initialize()
	r.send(`{"jsonrpc":"2.0","id":2,"method":"agentSession.attach","params":{"sessionId":"s_aaaaaaaa"}}`)
	// never read again
	select {
	case <-fake.closedCh:
	case <-time.After(20 * time.Second):
		t.Fatal("a connection that stopped reading was not closed")
	}
	ts.logs.waitFor(t, 1, "peer stopped reading", "reason=write_timeout")
}

// TestShutdownAndStats: daemon.shutdown answers {} and then calls
// OnShutdown; daemon.stats merges rpc counters with the backend's.
func TestShutdownAndStats(t *testing.T) {
	called := make(chan struct{})
	ts := startServer(t, newFake(), func(o *ServerOptions) { o.OnShutdown = func() { close(called) } })
	c := ts.client(t, FramingHeader, nil, false)
	var stats map[string]any
	if err := call(t, c, "daemon.stats", nil, &stats); err != nil {
		t.Fatal(err)
	}
	rpcs, _ := stats["rpcs"].(map[string]any)
	if rpcs["initialize"] != 1.0 || stats["evictions"] != 0.0 || stats["refusedPeers"] != 0.0 {
		t.Fatalf("stats = %v", stats)
	}
	select {
	case <-called:
		t.Fatal("OnShutdown before daemon.shutdown")
	default:
	}
	var res map[string]any
	if err := call(t, c, "daemon.shutdown", nil, &res); err != nil || len(res) != 0 {
		t.Fatalf("shutdown: %v %v", res, err)
	}
	wait(t, called)
}

// TestInternalErrorKeepsServing: a panicking handler is -32603 and the
// connection and daemon go on.
func TestInternalErrorKeepsServing(t *testing.T) {
	fake := newFake()
	fake.panicOn = "create"
	ts := startServer(t, fake, nil)
	c := ts.client(t, FramingLines, nil, false)
	err := call(t, c, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, nil)
	if !errors.Is(err, &Error{Code: CodeInternal}) {
		t.Fatalf("err = %v, want -32603", err)
	}
	if err := call(t, c, "agentSession.list", nil, nil); err != nil {
		t.Fatal(err)
	}
	ts.logs.waitFor(t, 1, "handler panicked")
	_ = fmt.Sprint()
}
