package rpc

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
)

// inlineFake is fakeBackend that can answer holds and releases without
// waiting (api.InlineBackend) while now says so; those it answers are
// recorded as "holdnow"/"releasenow".
type inlineFake struct {
	*fakeBackend
	now   atomic.Bool
	calls atomic.Int64 // HoldNow and ReleaseNow asked
}

func (f *inlineFake) HoldNow(conn string, p api.HoldParams) (api.HoldResult, bool, error) {
	f.calls.Add(1)
	if !f.now.Load() {
		return api.HoldResult{}, false, nil
	}
	f.record(p.SessionID, "holdnow "+p.HolderID)
	return api.HoldResult{SessionID: p.SessionID, State: "live", HoldToken: "h_now"}, true, nil
}

func (f *inlineFake) ReleaseNow(conn string, p api.ReleaseParams) (api.ReleaseResult, bool, error) {
	f.calls.Add(1)
	if !f.now.Load() {
		return api.ReleaseResult{}, false, nil
	}
	f.record(p.SessionID, "releasenow "+p.HolderID)
	return api.ReleaseResult{Released: true, Holders: []string{}}, true, nil
}

func startInline(t *testing.T) (*testServer, *inlineFake) {
	t.Helper()
	f := &inlineFake{fakeBackend: newFake()}
	ts := startServer(t, f.fakeBackend, func(o *ServerOptions) { o.Backend = f })
	return ts, f
}

func (f *inlineFake) opsOf(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops[id]...)
}

// TestHoldReleaseAnsweredInline: a hold and a release the backend can
// answer without waiting are answered on the reading goroutine (counted
// in daemon.stats answeredInline), never queued (Hold and Release are not
// called); when the backend would wait, the same calls are queued and
// answered by Hold and Release.
func TestHoldReleaseAnsweredInline(t *testing.T) {
	ts, f := startInline(t)
	f.now.Store(true)
	r := ts.raw(t, FramingLines)
	r.initialize()
	for i := range 3 {
		r.send(req(10+2*i, "agentSession.hold", `{"sessionId":"s_aaaaaaaa","holderId":"a"}`))
		if m := r.recv(); m["result"] == nil {
			t.Fatalf("hold: %v", m)
		}
		r.send(req(11+2*i, "agentSession.release", `{"sessionId":"s_aaaaaaaa","holderId":"a"}`))
		if m := r.recv(); m["result"] == nil {
			t.Fatalf("release: %v", m)
		}
	}
	want := []string{"holdnow a", "releasenow a", "holdnow a", "releasenow a", "holdnow a", "releasenow a"}
	if got := f.opsOf("s_aaaaaaaa"); !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v (nothing queued)", got, want)
	}
	if n := ts.srv.stats.answeredInline.Load(); n != 6 {
		t.Fatalf("answeredInline %d, want 6", n)
	}
	f.now.Store(false)
	r.send(req(20, "agentSession.hold", `{"sessionId":"s_bbbbbbbb","holderId":"b"}`))
	if m := r.recv(); m["result"] == nil {
		t.Fatalf("queued hold: %v", m)
	}
	r.send(req(21, "agentSession.release", `{"sessionId":"s_bbbbbbbb","holderId":"b"}`))
	if m := r.recv(); m["result"] == nil {
		t.Fatalf("queued release: %v", m)
	}
	if got, want := f.opsOf("s_bbbbbbbb"), []string{"hold b", "release b"}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v (queued)", got, want)
	}
	if n := ts.srv.stats.answeredInline.Load(); n != 6 {
		t.Fatalf("answeredInline %d after would-wait calls, want still 6", n)
	}
}

// TestInlineKeepsTheConnectionsOrder: a hold pipelined behind a call
// still in its queue (a send that waits) is not answered ahead of it:
// while anything of the connection is queued, its holds are queued too,
// and run in the order they were read.
func TestInlineKeepsTheConnectionsOrder(t *testing.T) {
	ts, f := startInline(t)
	f.now.Store(true)
	release := make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let) // a failure before it must not leave the send waiting
	f.sendHook = func(context.Context) error { <-release; return nil }
	r := ts.raw(t, FramingLines)
	r.initializeAll()
	r.write(r.frame(
		req(1, "agentSession.send", `{"sessionId":"s_aaaaaaaa","text":"hi"}`),
		req(2, "agentSession.hold", `{"sessionId":"s_aaaaaaaa","holderId":"a"}`),
	))
	waitState(t, func() bool { return slices.Contains(f.opsOf("s_aaaaaaaa"), "send") }) // the send runs
	let()
	first, second := r.recv(), r.recv()
	if first["id"] != float64(1) || second["id"] != float64(2) {
		t.Fatalf("answered %v then %v: the hold overtook the send", first["id"], second["id"])
	}
	if got, want := f.opsOf("s_aaaaaaaa"), []string{"send", "hold a"}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("HoldNow asked %d times while a call was queued", n)
	}
}

// TestCallGateTryEnter: tryEnter lets a call in unless calls are held.
func TestCallGateTryEnter(t *testing.T) {
	var g callGate
	if !g.tryEnter() {
		t.Fatal("an open gate refused")
	}
	g.leave()
	g.mu.Lock()
	g.paused = true
	g.mu.Unlock()
	if g.tryEnter() {
		t.Fatal("a paused gate let a call in")
	}
}
