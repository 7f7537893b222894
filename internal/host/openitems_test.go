package host

import (
	"context"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestOpenItemsCompletedInterrupted: an item the provider started and
// never completed (its command waits on an approval) is completed
// interrupted before the turn ends — when the user cancels the turn and
// when the child is killed mid-turn.
func TestOpenItemsCompletedInterrupted(t *testing.T) {
	for _, how := range []string{"cancel", "kill"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			id := f.create("echo")
			pid := f.hold(id, "h", "c1").PID
			if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/work"}); err != nil {
				t.Fatal(err)
			}
			f.waitFor(id, 0, isType(event.ApprovalRequested))
			if how == "cancel" {
				if _, err := f.h.Cancel(ctx, id); err != nil {
					t.Fatal(err)
				}
			} else {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			f.waitFor(id, 0, isType(event.TurnCompleted))
			evs, _, _, err := f.j.Read(id, 0, 4096)
			if err != nil {
				t.Fatal(err)
			}
			open := map[string]bool{}
			for _, ev := range evs {
				d := data(ev)
				switch ev.Type {
				case event.ItemStarted:
					open[d["itemId"].(string)] = true
				case event.ItemCompleted:
					delete(open, d["itemId"].(string))
				case event.TurnCompleted:
					if len(open) != 0 {
						t.Fatalf("turn.completed with items still open %v: %v", open, f.types(id))
					}
				}
			}
		})
	}
}
