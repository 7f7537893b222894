package codex

import (
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// A resumed thread's restored usage (thread/tokenUsage/updated naming the
// thread's last turn, which codex 0.169 sends right after the
// thread/resume answer) arriving once our first turn is open, before
// turn/start answers, must not bind that old turn to ours: the turn's own
// lines (its real id) still reach it and it completes. (Measured with the
// real codex: a thread carried back to a home, its next turn never ended.)
func TestResumedUsageDoesNotBindOldTurn(t *testing.T) {
	f := newFake(t, func(o *Options) { o.ThreadID = "thr_1" })
	ch := make(chan error, 1)
	go func() { _, err := f.a.Start(testCtx(t)); ch <- err }()
	f.reply(t, f.expect(t, "initialize"), map[string]any{})
	f.expect(t, "initialized")
	f.reply(t, f.expect(t, "thread/resume"), map[string]any{"thread": map[string]any{"id": "thr_1",
		"turns": []any{map[string]any{"id": "turn_a"}, map[string]any{"id": "turn_old"}}}})
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.a.StartTurn(testCtx(t), "t1", "hi") }()
	m := f.expect(t, "turn/start")
	f.send(t, map[string]any{"method": "thread/tokenUsage/updated", "params": map[string]any{"threadId": "thr_1", "turnId": "turn_old",
		"tokenUsage": map[string]any{"last": map[string]any{"totalTokens": 15}}}})
	f.reply(t, m, map[string]any{"turn": map[string]any{"id": "turn_new", "status": "inProgress"}})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "thr_1",
		"turn": map[string]any{"id": "turn_new", "status": "completed"}}})
	tc := decode[event.TurnCompletedData](t, f.rec.waitFor(t, event.TurnCompleted, "t1"))
	if tc.Status != event.StatusCompleted || tc.ProviderTurnID != "turn_new" {
		t.Fatalf("turn.completed %+v", tc)
	}
}
