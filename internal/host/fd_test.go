package host

import (
	"context"
	"os"
	"runtime/debug"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// Every descriptor of a provider child (its pipes, its pidfd) is closed by
// the session's teardown, not left to the garbage collector: 200 lifecycles
// (hold, send, then close or the release clock) leave the count unchanged.
func TestLifecyclesLeakNoDescriptors(t *testing.T) {
	const lifecycles = 200
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	lifecycle := func(i int) {
		f.hold(id, "h", "c1")
		sr, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnCompleted && ev.TurnID == sr.TurnID })
		if i%2 == 0 {
			if _, err := f.h.Close(ctx, id); err != nil {
				t.Fatal(err)
			}
		} else {
			if _, err := f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "h"}); err != nil {
				t.Fatal(err)
			}
			f.clk.Advance(idle)
		}
		if f.h.lookup(id) != nil {
			t.Fatalf("lifecycle %d: session still in the map", i)
		}
	}
	lifecycle(0) // warm-up: lazily opened descriptors (store, /proc readers)
	// The garbage collector would close what a teardown forgot, hiding it.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	before := openFDs(t)
	for i := range lifecycles {
		lifecycle(i)
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d descriptors open before %d lifecycles, %d after", before, lifecycles, after)
	}
}
