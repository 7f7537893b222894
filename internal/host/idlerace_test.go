package host

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestRuntimeClockRacesHold: a hold of a new session at the moment the
// runtime's release clock decided to stop it (its last session gone)
// never binds to the runtime being stopped: the session starts on a new
// runtime and stays live once the old one is gone.
func TestRuntimeClockRacesHold(t *testing.T) {
	f := newFixture(t)
	a, b := f.create("shared"), f.create("shared")
	f.hold(a, "w", "c1")
	first := f.info(a)
	if _, err := f.h.Close(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	var raced api.HoldResult
	f.h.mu.Lock()
	f.h.runtimeIdleDecided = func(string) {
		f.h.mu.Lock()
		f.h.runtimeIdleDecided = nil
		f.h.mu.Unlock()
		raced = f.hold(b, "w", "c1") // the runtime's clock goroutine, between its decision and its teardown
	}
	f.h.mu.Unlock()
	f.clk.Advance(idle) // the runtime's clock
	if raced.PID == 0 {
		t.Fatal("the runtime's clock never decided: nothing tested")
	}
	if alive(first.PID) {
		t.Fatalf("the idle runtime %d still runs", first.PID)
	}
	si := f.info(b)
	if si.State != "live" || si.RuntimeID == first.RuntimeID || si.PID == first.PID || !alive(si.PID) {
		t.Fatalf("a hold racing the runtime's release clock: %+v (the stopped runtime: %s pid %d)", si, first.RuntimeID, first.PID)
	}
	for _, typ := range f.types(b) {
		if typ == event.ProviderExited || typ == event.SessionEnded {
			t.Fatalf("the session held at the clock's moment got %s: %v", typ, f.types(b))
		}
	}
}
