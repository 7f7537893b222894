package claude

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// startWith runs Start against the fake's initialize answer.
func (f *fake) startWith(t *testing.T) provider.StartResult {
	t.Helper()
	type out struct {
		r   provider.StartResult
		err error
	}
	done := make(chan out, 1)
	go func() { r, err := f.a.Start(t.Context()); done <- out{r, err} }()
	init := f.read(t)
	f.send(t, map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
		"request_id": init["request_id"], "response": map[string]any{}}})
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.r
}

// turn opens turn id and plays its init naming session.
func (f *fake) turn(t *testing.T, id, session string) {
	t.Helper()
	if err := f.a.StartTurn(t.Context(), id, "hi"); err != nil {
		t.Fatal(err)
	}
	if m := f.read(t); m["type"] != "user" {
		t.Fatalf("turn wrote %v", m)
	}
	f.send(t, map[string]any{"type": "system", "subtype": "init", "session_id": session})
}

// A resumed CLI whose init names another session_id moved the thread:
// the journal says so (provider.thread_replaced old -> new) and the new
// id is recorded; a later change does the same.
func TestChangedSessionIDJournaled(t *testing.T) {
	learned := make(chan string, 8)
	f := newFake(t, func(o *provider.Options) {
		o.ThreadID = "sess-old"
		o.OnThreadID = func(id string) { learned <- id }
	})
	if r := f.startWith(t); r.ThreadID != "sess-old" || !r.Resumed {
		t.Fatalf("start %+v", r)
	}
	f.turn(t, "t_1", "sess-old") // the same id: nothing to say
	f.send(t, map[string]any{"type": "result", "subtype": "success"})
	f.next(t, event.TurnCompleted)
	f.turn(t, "t_2", "sess-new")
	rep := decodeData[event.ThreadReplacedData](t, f.next(t, event.ProviderThreadReplace))
	if rep.OldThreadID != "sess-old" || rep.NewThreadID != "sess-new" || !strings.Contains(rep.Cause, "session_id") {
		t.Fatalf("thread_replaced %+v", rep)
	}
	if got := <-learned; got != "sess-new" {
		t.Fatalf("recorded %s", got)
	}
	if f.a.ThreadID() != "sess-new" {
		t.Fatalf("thread %s", f.a.ThreadID())
	}
}

// A fresh CLI replacing a conversation Claude no longer has journals
// provider.thread_replaced at start, before any turn (a hold closed
// without a turn must not lose the old id silently); the new
// conversation's id is recorded when its init names it, with no second
// replacement.
func TestReplacementJournaledAtStart(t *testing.T) {
	learned := make(chan string, 8)
	f := newFake(t, func(o *provider.Options) {
		o.Replaces = &event.ThreadReplacedData{OldThreadID: "sess-gone", Cause: "No conversation found with session ID: sess-gone"}
		o.OnThreadID = func(id string) { learned <- id }
	})
	r := f.startWith(t)
	if r.Resumed || r.Replaced == nil || r.Replaced.OldThreadID != "sess-gone" {
		t.Fatalf("start %+v", r)
	}
	// Emitted by Start itself: it is there before Start returns.
	select {
	case d := <-f.evs:
		rep := decodeData[event.ThreadReplacedData](t, d)
		if d.Type != event.ProviderThreadReplace || rep.OldThreadID != "sess-gone" || rep.NewThreadID != "" || !strings.Contains(rep.Cause, "No conversation") {
			t.Fatalf("%s %s", d.Type, d.Data)
		}
	default:
		t.Fatal("no provider.thread_replaced once Start returned")
	}
	f.turn(t, "t_1", "sess-fresh")
	f.send(t, map[string]any{"type": "result", "subtype": "success"})
	f.next(t, event.TurnCompleted)
	if got := <-learned; got != "sess-fresh" {
		t.Fatalf("recorded %s", got)
	}
	for len(f.evs) > 0 {
		if d := <-f.evs; d.Type == event.ProviderThreadReplace {
			t.Fatalf("a second thread_replaced %s", d.Data)
		}
	}
}

// A can_use_tool request outside any turn is relayed without a turn and
// stays open (and answerable) across the next turn: that turn's end
// cancels only its own approvals.
func TestApprovalOutsideTurnNotTheNextTurns(t *testing.T) {
	f := newFake(t, nil)
	f.started(t) // turn t_1
	f.send(t, map[string]any{"type": "result", "subtype": "success"})
	f.next(t, event.TurnCompleted)
	f.send(t, map[string]any{"type": "control_request", "request_id": "late", "request": map[string]any{
		"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": "x"}, "tool_use_id": "toolu_late"}})
	req := f.next(t, event.ApprovalRequested)
	if req.TurnID != "" {
		t.Fatalf("approval outside a turn journaled in turn %q", req.TurnID)
	}
	if !f.a.Busy() {
		t.Fatal("an open approval must keep the adapter busy")
	}
	f.turn(t, "t_2", "sess-1")
	f.send(t, map[string]any{"type": "control_request", "request_id": "own", "request": map[string]any{
		"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": "y"}, "tool_use_id": "toolu_own"}})
	f.next(t, event.ApprovalRequested)
	f.send(t, map[string]any{"type": "result", "subtype": "success"})
	for {
		d := <-f.evs
		if d.Type == event.ApprovalResolved {
			if r := decodeData[event.ApprovalResolvedData](t, d); r.RequestID != "own" || d.TurnID != "t_2" {
				t.Fatalf("turn t_2's end resolved %+v in turn %q", r, d.TurnID)
			}
		}
		if d.Type == event.TurnCompleted {
			break
		}
	}
	if err := f.a.Respond(t.Context(), "late", provider.Answer{Decision: "deny"}); err != nil {
		t.Fatalf("the approval outside a turn is no longer answerable: %v", err)
	}
	if m := f.read(t); m["response"].(map[string]any)["request_id"] != "late" {
		t.Fatalf("wrote %v", m)
	}
	if d := f.next(t, event.ApprovalResolved); d.TurnID != "" {
		t.Fatalf("resolved in turn %q", d.TurnID)
	}
	if f.a.Busy() {
		t.Fatal("busy once everything was answered")
	}
	if !strings.Contains(f.log(), "kind=approval_outside_turn") {
		t.Fatalf("not logged:\n%s", f.log())
	}
}

// A fresh CLI given the daemon's id (--session-id, Options.FreshThreadID)
// has it from Start, before any turn, and a replacement names it as the
// new thread at once; the first init naming it tells OnThreadID that the
// CLI has begun it (nothing journaled), a later one says nothing.
func TestFreshThreadIDAtStart(t *testing.T) {
	learned := make(chan string, 8)
	f := newFake(t, func(o *provider.Options) {
		o.FreshThreadID = "sess-minted"
		o.Replaces = &event.ThreadReplacedData{OldThreadID: "sess-gone", Cause: "No conversation found with session ID: sess-gone"}
		o.OnThreadID = func(id string) { learned <- id }
	})
	r := f.startWith(t)
	if r.ThreadID != "sess-minted" || r.Resumed || r.Replaced == nil || r.Replaced.NewThreadID != "sess-minted" {
		t.Fatalf("start %+v", r)
	}
	if rep := decodeData[event.ThreadReplacedData](t, f.next(t, event.ProviderThreadReplace)); rep.OldThreadID != "sess-gone" || rep.NewThreadID != "sess-minted" {
		t.Fatalf("thread_replaced at start %+v", rep)
	}
	for _, turn := range []string{"t_1", "t_2"} {
		f.turn(t, turn, "sess-minted")
		f.send(t, map[string]any{"type": "result", "subtype": "success", "session_id": "sess-minted"})
		for {
			d := <-f.evs
			if d.Type == event.ProviderThreadReplace {
				t.Fatalf("a second thread_replaced %s", d.Data)
			}
			if d.Type == event.TurnCompleted {
				break
			}
		}
	}
	got := "" // told on the reader before it read the result: there by now
	select {
	case got = <-learned:
	default:
	}
	if got != "sess-minted" || len(learned) != 0 || f.a.ThreadID() != "sess-minted" {
		t.Fatalf("the minted id begun: learned %q (+%d), thread %s", got, len(learned), f.a.ThreadID())
	}
}

// FreshThread mints a random version-4 UUID, passed as --session-id.
func TestFreshThreadMintsUUID(t *testing.T) {
	a, argsA, err := FreshThread("")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := FreshThread("")
	if len(a) != 36 || a[14] != '4' || !strings.ContainsRune("89ab", rune(a[19])) || a == b || !validSessionID(a) {
		t.Fatalf("minted %q, %q", a, b)
	}
	if len(argsA) != 2 || argsA[0] != "--session-id" || argsA[1] != a {
		t.Fatalf("args %v", argsA)
	}
	if c, args, err := FreshThread(a); err != nil || c != a || len(args) != 2 || args[1] != a {
		t.Fatalf("reused %q: %q %v %v", a, c, args, err)
	}
}
