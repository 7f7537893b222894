package codextest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// SharedCloseKillsLeftovers is the leftover-commands scenario of a shared
// runtime (d's, its model a SharedModel), run by both shared tests'
// packages: each of two sessions of provider (their client given) leaves
// a detached process behind an approved command; closing the first stops
// its process only (and logs it): the second's and the runtime run on,
// and the second takes a new turn. It returns the two sessions.
func SharedCloseKillsLeftovers(t *testing.T, d *daemontest.Daemon, client, provider string) []*providertest.Session {
	t.Helper()
	ss := []*providertest.Session{
		providertest.NewSession(t, d, client, provider, t.TempDir()),
		providertest.NewSession(t, d, client, provider, t.TempDir()),
	}
	_, pid := OneRuntime(t, ss)
	left := make([]int, len(ss))
	for i, s := range ss {
		turn := SendPrompt(t, s, "spawn", i)
		req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
		s.Respond(t, req.RequestID, "approve")
		if tc := TurnDone(t, s, turn); tc.Status != event.StatusCompleted {
			t.Fatalf("session %d: %+v", i, tc)
		}
		if left[i] = LeftoverPID(d, fmt.Sprintf("tag-%d", i)); left[i] == 0 {
			t.Fatalf("session %d's command left no process: nothing to test", i)
		}
	}
	ss[0].Close(t)
	ss[0].Next(t, event.LeaseReleased)
	if providertest.Alive(left[0]) {
		t.Fatalf("the closed session's leftover command %d still runs\n%s", left[0], d.Log.String())
	}
	if !providertest.Alive(left[1]) || !providertest.Alive(pid) {
		t.Fatalf("closing session 0 stopped session 1's command (%d alive %v) or the runtime (%d alive %v)",
			left[1], providertest.Alive(left[1]), pid, providertest.Alive(pid))
	}
	if !strings.Contains(d.Log.String(), "leftover commands of a detaching session stopped") {
		t.Errorf("no log line for the stopped leftovers")
	}
	tn := SendPrompt(t, ss[1], "again", 1)
	if tc := TurnDone(t, ss[1], tn); tc.Status != event.StatusCompleted {
		t.Fatalf("session 1 after session 0 closed: %+v", tc)
	}
	return ss
}
