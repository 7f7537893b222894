package codextest

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// SharedKillMidTurn is the runtime-killed scenario of a shared runtime
// (d's, its model m a SharedModel holding "say" replies until gate is
// closed), run by both shared tests' packages: three sessions of provider
// on one runtime, two with a turn in flight; SIGKILL of the runtime ends
// each session (its turn interrupted {provider_exited}, provider.exited
// of that runtime, session.ended, lease.released), no other session's
// turn or text in its journal, no process left; gate is closed, and the
// next holds start one new runtime (a new id and pid). It returns the
// sessions, held on the new runtime.
func SharedKillMidTurn(t *testing.T, d *daemontest.Daemon, m *Model, gate chan struct{}, client, provider string) []*providertest.Session {
	t.Helper()
	ss := make([]*providertest.Session, 3)
	for i := range ss {
		ss[i] = providertest.NewSession(t, d, client, provider, t.TempDir())
	}
	rt, pid := OneRuntime(t, ss)
	turns := []string{SendPrompt(t, ss[0], "say", 0), SendPrompt(t, ss[1], "say", 1)}
	Arrivals(t, m, 2)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		s.Next(t, event.LeaseReleased)
		evs := s.ReadAll(t)
		var tail []string
		for _, ev := range evs[len(evs)-4:] {
			tail = append(tail, ev.Type)
		}
		want := []string{event.TurnCompleted, event.ProviderExited, event.SessionEnded, event.LeaseReleased}
		if i == 2 {
			want = want[1:]
			tail = tail[1:]
		}
		if strings.Join(tail, ",") != strings.Join(want, ",") {
			t.Fatalf("session %d's tail %v, want %v (journal %s)", i, tail, want, s.Types())
		}
		if i < 2 {
			tc := providertest.Decode[event.TurnCompletedData](t, evs[len(evs)-4])
			if evs[len(evs)-4].TurnID != turns[i] || tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonProviderExited {
				t.Fatalf("session %d: turn.completed %+v of turn %s, want %s", i, tc, evs[len(evs)-4].TurnID, turns[i])
			}
		}
		exited := providertest.Decode[event.ProviderExitedData](t, providertest.LastOf(t, evs, event.ProviderExited))
		if exited.RuntimeID != rt {
			t.Fatalf("session %d: provider.exited %+v, want runtime %s", i, exited, rt)
		}
		for _, ev := range evs {
			for j, other := range turns {
				if j != i && ev.TurnID == other {
					t.Fatalf("session %d's journal holds session %d's %s", i, j, ev.Type)
				}
			}
		}
		OnlyOwnTags(t, s, fmt.Sprintf("tag-%d", i))
	}
	providertest.NoProcesses(t, d)
	close(gate) // the killed runtime's requests: nobody reads their answers

	// The next hold starts a new runtime; the others join it.
	for _, s := range ss {
		s.AttachAndHold(t)
	}
	rt2, pid2 := OneRuntime(t, ss)
	if rt2 == rt || pid2 == pid {
		t.Fatalf("after the kill: runtime %s pid %d, the killed one %s pid %d", rt2, pid2, rt, pid)
	}
	return ss
}
