package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
)

// TestThreadReusedByTwoRecords: two session records naming one provider
// thread (a damaged or copied store). While the first session is on its
// runtime, a hold of the second is refused naming the thread, the
// runtime loads nothing new, and the first session's events stay its
// own: a turn of it reaches only its journal.
func TestThreadReusedByTwoRecords(t *testing.T) {
	f := newFixture(t)
	a := f.create("shared")
	ha := f.hold(a, "w", "c1")
	b := f.create("shared")
	if err := f.st.UpdateRecord(b, func(r *store.Record) { r.ThreadID = ha.ThreadID }); err != nil {
		t.Fatal(err)
	}
	_, err := f.h.Hold(context.Background(), "c2", api.HoldParams{SessionID: b, HolderID: "w"})
	if err == nil || !strings.Contains(err.Error(), ha.ThreadID) {
		t.Fatalf("hold of a second record naming thread %s: %v, want a refusal naming it", ha.ThreadID, err)
	}
	if !errors.Is(err, api.ErrProviderFailed) {
		t.Fatalf("refusal %v, want provider_failed", err)
	}
	f.send(a, "mine")
	f.waitFor(a, 0, isType(event.TurnCompleted))
	evs, _, _, err := f.j.Read(b, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.TurnID != "" {
			t.Fatalf("session b got %s of a's turn", ev.Type)
		}
	}
	if si := f.info(a); si.PID != ha.PID {
		t.Fatalf("session a moved to pid %d (was %d)", si.PID, ha.PID)
	}
}
