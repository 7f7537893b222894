package acp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// A fresh session: initialize as the contract says, session/new {cwd,
// mcpServers: []}, then a turn streamed as message.delta, closed by the
// prompt's answer (message.completed, turn.usage, turn.completed with
// stopReason).
func TestStartAndTextTurn(t *testing.T) {
	g := startAgent(t, "", nil)
	res := g.start(t)
	if res.ThreadID != "sess-1" || res.Resumed || res.Replaced != nil {
		t.Fatalf("start = %+v", res)
	}
	init := g.sentMethod("initialize")[0]
	caps, _ := init["clientCapabilities"].(map[string]any)
	fs, _ := caps["fs"].(map[string]any)
	if init["protocolVersion"] != float64(1) || caps["terminal"] != false || fs["readTextFile"] != false || fs["writeTextFile"] != false || init["clientInfo"] == nil {
		t.Fatalf("initialize = %v", init)
	}
	if len(g.sentMethod("authenticate")) != 0 {
		t.Fatal("authenticated without auth_method")
	}
	if n := g.sentMethod("session/new")[0]; n["cwd"] == "" || n["mcpServers"] == nil {
		t.Fatalf("session/new = %v", n)
	}
	evs := g.turn(t, "t_1", "hello")
	var text string
	for _, d := range of(evs, event.MessageDelta) {
		text += data[event.DeltaData](t, d).Text
	}
	if text != "Hello" {
		t.Fatalf("deltas %q; events %s", text, types(evs))
	}
	if mc := of(evs, event.MessageCompleted); len(mc) != 1 || data[event.DeltaData](t, mc[0]).Text != "Hello" {
		t.Fatalf("message.completed: %s", types(evs))
	}
	us := of(evs, event.TurnUsage)
	if len(us) != 2 || data[event.TurnUsageData](t, us[0]).TotalTokens != 1200 || data[event.TurnUsageData](t, us[1]).OutputTokens != 2 {
		t.Fatalf("usage: %v", us)
	}
	tc := data[event.TurnCompletedData](t, evs[len(evs)-1])
	if tc.Status != event.StatusCompleted || tc.StopReason != "end_turn" || evs[len(evs)-1].TurnID != "t_1" {
		t.Fatalf("turn.completed = %+v", tc)
	}
	p := g.sentMethod("session/prompt")[0]
	if p["sessionId"] != "sess-1" {
		t.Fatalf("prompt = %v", p)
	}
	if err := g.a.StartTurn(t.Context(), "t_2", "slow"); err != nil {
		t.Fatal(err)
	}
	if err := g.a.StartTurn(t.Context(), "t_3", "hello"); !errors.Is(err, provider.ErrTurnRunning) {
		t.Fatalf("second turn: %v", err)
	}
	if ok, err := g.a.Interrupt(t.Context()); !ok || err != nil {
		t.Fatalf("interrupt: %v %v", ok, err)
	}
	g.until(t, event.TurnCompleted)
}

// auth_method: authenticate {methodId} after initialize; one the agent
// does not offer fails Start naming both.
func TestAuthenticate(t *testing.T) {
	g := startAgent(t, "", func(_ *provider.Options, p *Profile) { p.AuthMethod = "key" })
	g.start(t)
	if a := g.sentMethod("authenticate"); len(a) != 1 || a[0]["methodId"] != "key" {
		t.Fatalf("authenticate = %v", a)
	}
	g = startAgent(t, "", func(_ *provider.Options, p *Profile) { p.AuthMethod = "oauth" })
	_, err := g.a.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), `"oauth"`) || !strings.Contains(err.Error(), "[key]") {
		t.Fatalf("start with an auth method not offered: %v", err)
	}
}

// An agent that speaks another protocolVersion fails Start naming it; one
// that never answers initialize fails within the start context.
func TestBadHandshake(t *testing.T) {
	g := startAgent(t, "badversion", nil)
	_, err := g.a.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "protocolVersion 2") {
		t.Fatalf("start: %v", err)
	}
	g = startAgent(t, "silent", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = g.a.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "did not answer initialize") {
		t.Fatalf("start: %v", err)
	}
}

// A load replays history before its answer: none of it is journaled; the
// session resumes. Without loadSession, or when the agent no longer has
// it, the session is fresh and provider.thread_replaced says so.
func TestLoad(t *testing.T) {
	g := startAgent(t, "", func(o *provider.Options, _ *Profile) { o.ThreadID = "sess-old" })
	res := g.start(t)
	if res.ThreadID != "sess-old" || !res.Resumed {
		t.Fatalf("start = %+v", res)
	}
	if l := g.sentMethod("session/load"); len(l) != 1 || l[0]["sessionId"] != "sess-old" || l[0]["mcpServers"] == nil {
		t.Fatalf("load = %v", l)
	}
	evs := g.turn(t, "t_1", "hello")
	if types(evs) != "message.delta,message.delta,turn.usage,message.completed,turn.usage,turn.completed" {
		t.Fatalf("the replay was journaled: %s", types(evs))
	}
	for _, c := range []struct{ mode, old, cause string }{{"noload", "sess-old", "loadSession"}, {"", "gone", "Resource not found"}} {
		g := startAgent(t, c.mode, func(o *provider.Options, _ *Profile) { o.ThreadID = c.old })
		res := g.start(t)
		if res.Resumed || res.ThreadID != "sess-1" || res.Replaced == nil || res.Replaced.OldThreadID != c.old ||
			!strings.Contains(res.Replaced.Cause, c.cause) {
			t.Fatalf("%s: start = %+v", c.mode, res)
		}
		d := <-g.evs
		if d.Type != event.ProviderThreadReplace || data[event.ThreadReplacedData](t, d).NewThreadID != "sess-1" {
			t.Fatalf("%s: %s %s", c.mode, d.Type, d.Data)
		}
	}
}
