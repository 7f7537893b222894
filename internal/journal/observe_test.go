package journal

import (
	"context"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// TestObserveSeesEveryCommitInOrder: Options.Observe is told of every
// committed event of every session, in commit order, once, and the state
// State reports already includes it when it is told (the attention
// loop's running-turn count reads it).
func TestObserveSeesEveryCommitInOrder(t *testing.T) {
	var (
		mu    sync.Mutex
		got   []event.Event
		opens []string // OpenTurn of the event's session, as State said when observed
		j     *Journal
	)
	ready := make(chan struct{})
	j, _ = open(t, Options{Observe: func(evs []event.Event) {
		<-ready
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			got = append(got, ev)
			opens = append(opens, j.State(ev.SessionID).OpenTurn)
		}
	}})
	close(ready)
	ctx := context.Background()
	if _, err := j.Append(ctx, "s_aaaaaaaa", event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1"})); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "s_bbbbbbbb", event.New(event.TurnStarted, "t2", event.TurnStartedData{TurnID: "t2"}), delta("t2", "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "s_aaaaaaaa", event.New(event.TurnCompleted, "t1", event.TurnCompletedData{Status: event.StatusCompleted})); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []struct{ id, typ, open string }{
		{"s_aaaaaaaa", event.TurnStarted, "t1"},
		{"s_bbbbbbbb", event.TurnStarted, "t2"},
		{"s_bbbbbbbb", event.MessageDelta, "t2"},
		{"s_aaaaaaaa", event.TurnCompleted, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("observed %d events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].SessionID != w.id || got[i].Type != w.typ || opens[i] != w.open || got[i].Seq == 0 {
			t.Fatalf("observed #%d: %s %s seq %d (open turn %q), want %s %s (open %q)", i,
				got[i].SessionID, got[i].Type, got[i].Seq, opens[i], w.id, w.typ, w.open)
		}
	}
}
