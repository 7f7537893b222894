package host

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// cancel while the child is exiting after a crash answers {cancelled:false}
// or session_not_live, never provider_failed: the adapter sees the exit (a
// broken pipe, stdout's end) before the host's watcher does, and that
// window is where the cancels land.
func TestCancelDuringCrashExitIsNotAFailure(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	for round := range 30 {
		f.hold(id, "h", "c1")
		sr, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/crash"})
		if err != nil {
			t.Fatal(err)
		}
		// The crash follows the turn's first delta.
		delta := f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.MessageDelta && ev.TurnID == sr.TurnID })
		for {
			_, err := f.h.Cancel(ctx, id)
			if err == nil {
				continue // answered while the child still ran
			}
			if api.KindOf(err) != api.KindSessionNotLive {
				t.Fatalf("round %d: cancel during the crash exit: %v (kind %v), want session_not_live or {cancelled:false}",
					round, err, api.KindOf(err))
			}
			break
		}
		f.waitFor(id, delta.Seq, isType(event.LeaseReleased)) // torn down before the next round
	}
}
