package codex

import (
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// A resumed thread's restored usage (thread/tokenUsage/updated naming
// the thread's last turn, sent right after thread/resume) that the reader
// gets to only once StartTurn opened our turn must not bind that turn to
// the old provider turn: the new turn's lines would all be refused as
// outside the open turn and it would never complete (real codex 0.169
// after a resume under load: TestCodexMoveBetweenHomes hung so 3 in 4).
func TestStaleUsageDoesNotBindTurn(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	errc := make(chan error, 1)
	go func() { errc <- f.a.StartTurn(testCtx(t), "t2", "hi") }()
	m := f.expect(t, "turn/start")
	f.send(t, map[string]any{"method": "thread/tokenUsage/updated", "params": map[string]any{"threadId": "thr_1", "turnId": "pt_old",
		"tokenUsage": map[string]any{"last": map[string]any{"inputTokens": 10, "totalTokens": 15}}}})
	f.reply(t, m, map[string]any{"turn": map[string]any{"id": "pt_2", "status": "inProgress"}})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	f.send(t, map[string]any{"method": "turn/started", "params": map[string]any{"threadId": "thr_1", "turn": map[string]any{"id": "pt_2", "status": "inProgress"}}})
	f.send(t, map[string]any{"method": "item/agentMessage/delta", "params": map[string]any{"threadId": "thr_1", "turnId": "pt_2", "itemId": "m1", "delta": "apple"}})
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "thr_1", "turn": map[string]any{"id": "pt_2", "status": "completed"}}})
	d := f.rec.waitFor(t, event.TurnCompleted, "t2")
	if got := string(d.Data); !reflect.DeepEqual(got, `{"status":"completed","providerTurnId":"pt_2"}`) {
		t.Fatalf("turn.completed %s", got)
	}
	for _, d := range f.rec.all() {
		if d.Type == event.TurnUsage {
			t.Fatalf("the restored usage of an old turn was journaled as t2's: %s", d.Data)
		}
	}
}
