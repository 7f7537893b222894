package host

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// A provider that closes its stdout mid-turn and goes on running is gone
// for the session all the same: the adapter's reader ends (Done) with the
// child alive, and the host evicts it as exited: the turn completes
// interrupted (provider_exited), the ladder stops the child, the lease is
// released, the session can be held again.
func TestStdoutClosedWhileRunningEvicts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	e := f.h.lookup(id)
	sr, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/closeout"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor(id, 0, isType(event.LeaseReleased))
	tc := f.waitFor(id, 0, isType(event.TurnCompleted))
	if tc.TurnID != sr.TurnID || data(tc)["status"] != "interrupted" || data(tc)["reason"] != event.ReasonProviderExited {
		t.Fatalf("turn.completed %+v %s", tc, tc.Data)
	}
	f.waitFor(id, 0, isType(event.ProviderExited))
	// lease.released is journaled by the teardown's fifth step, under the
	// session lock; the entry is forgotten by the sixth. Taking the lock
	// waits for the teardown to end.
	if err := e.mu.LockCtx(ctx); err != nil {
		t.Fatal(err)
	}
	e.mu.Unlock()
	if f.h.lookup(id) != nil {
		t.Fatal("the session is still in the map")
	}
	f.hold(id, "h", "c1")
}
