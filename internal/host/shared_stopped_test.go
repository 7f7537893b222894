package host

import (
	"context"
	"slices"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// TestSharedCloseOfStoppedRuntime: closing a session whose shared
// runtime stopped answering (SIGSTOP) still ends it whole: the provider's
// answers (unsubscribe, interrupt) are waited for only part of a step's
// bound, so the step's own journal writes keep time to land. Idle and
// mid-turn alike: every step ok, the tail journaled, the lease released.
func TestSharedCloseOfStoppedRuntime(t *testing.T) {
	for _, busy := range []bool{false, true} {
		name := "idle"
		if busy {
			name = "mid-turn"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			a, b := f.create("shared"), f.create("shared")
			f.hold(a, "w", "c1")
			f.hold(b, "w", "c1")
			pid := f.info(a).PID
			if busy {
				f.send(b, "long /sleep 600000")
				f.waitFor(b, 0, isType(event.TurnStarted))
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
			res, err := f.h.Close(context.Background(), b)
			if err != nil {
				t.Fatalf("close of a session on a stopped runtime: %v", err)
			}
			for _, s := range res.Steps {
				if !s.OK {
					t.Fatalf("step %s failed: %+v (all: %+v)", s.Name, s, res.Steps)
				}
			}
			want := []string{event.ProviderDetached, event.SessionEnded, event.LeaseReleased}
			if busy {
				want = append([]string{event.TurnCompleted}, want...)
			}
			f.tail(b, want...)
			if !slices.Contains(f.types(a), event.LeaseAcquired) || !alive(pid) {
				t.Fatal("the other session's runtime went with the close")
			}
		})
	}
}
