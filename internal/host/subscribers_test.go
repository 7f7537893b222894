package host

import (
	"context"
	"errors"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
)

// A subscriber that never reads is detached as lagged; the provider's turn
// and other subscribers go on.
func TestSlowSubscriberCannotStallProvider(t *testing.T) {
	f := newFixture(t, journal.Options{QueueEvents: 8, CoalesceWindow: -1})
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	_, slow, err := f.h.Attach(ctx, "slow", api.AttachParams{SessionID: id}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/flood 2000"}); err != nil {
		t.Fatal(err)
	}
	// Another reader sees the whole turn end.
	f.waitFor(id, 0, isType(event.TurnCompleted))
	var last uint64
	for {
		ev, err := slow.Next(ctx)
		if errors.Is(err, api.ErrLagged) {
			break
		}
		if err != nil {
			t.Fatalf("slow subscriber: %v", err)
		}
		if last != 0 && ev.Seq != last+1 {
			t.Fatalf("gap: %d after %d", ev.Seq, last)
		}
		last = ev.Seq
	}
	if last == 0 {
		t.Fatal("lagged subscriber got nothing before the lag")
	}
	if err := f.h.Detach(ctx, "slow", slow.ID()); err != nil {
		t.Fatal(err)
	}
}
