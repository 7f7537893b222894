package codextest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// The five-sessions scenario of a shared runtime, run by both shared
// tests' packages in three parts around their own approval checks: d's
// model m is a SharedModel whose "say" and "later" replies wait for the
// gates given.

// SharedFiveTurns opens five sessions of provider on one runtime (tagged
// as the daemon's) and runs five turns at once: all five requests reach
// the model before say is closed, then each completes with its own reply
// only. It returns the sessions and the runtime's pid.
func SharedFiveTurns(t *testing.T, d *daemontest.Daemon, m *Model, say chan struct{}, client, provider string) ([]*providertest.Session, int) {
	t.Helper()
	const n = 5
	ss := make([]*providertest.Session, n)
	for i := range ss {
		ss[i] = providertest.NewSession(t, d, client, provider, t.TempDir())
	}
	_, pid := OneRuntime(t, ss)
	if tagged := daemontest.TaggedProcesses(d.StateID); !slices.Contains(tagged, pid) {
		t.Fatalf("tagged processes %v lack the runtime %d", tagged, pid)
	}

	// Five concurrent turns: all five requests reach the model before
	// any is answered.
	turns := make([]string, n)
	for i, s := range ss {
		turns[i] = SendPrompt(t, s, "say", i)
	}
	Arrivals(t, m, n)
	close(say)
	for i, s := range ss {
		if tc := TurnDone(t, s, turns[i]); tc.Status != event.StatusCompleted {
			t.Fatalf("session %d: turn.completed %+v", i, tc)
		}
		if text, _ := s.Message(t, turns[i]); text != fmt.Sprintf("say-reply-tag-%d", i) {
			t.Fatalf("session %d: reply %q; events %s", i, text, s.Types())
		}
		OnlyOwnTags(t, s, fmt.Sprintf("tag-%d", i))
	}
	return ss, pid
}

// SharedFiveCloseOne puts sessions 2, 3 and 4 in turns; closing 4 ends
// only its own (interrupted): the runtime (pid) runs on, and once later
// is closed 2 and 3 complete with their replies, still on pid.
func SharedFiveCloseOne(t *testing.T, m *Model, later chan struct{}, ss []*providertest.Session, pid int) {
	t.Helper()
	late := map[int]string{}
	for i := 2; i < len(ss); i++ {
		late[i] = SendPrompt(t, ss[i], "later", i)
	}
	Arrivals(t, m, 3)
	ss[4].Close(t)
	if tc := TurnDone(t, ss[4], late[4]); tc.Status != event.StatusInterrupted {
		t.Fatalf("the closed session's turn: %+v", tc)
	}
	ss[4].Next(t, event.LeaseReleased)
	if !providertest.Alive(pid) {
		t.Fatal("closing one session stopped the runtime")
	}
	close(later)
	for i := 2; i < 4; i++ {
		if tc := TurnDone(t, ss[i], late[i]); tc.Status != event.StatusCompleted {
			t.Fatalf("session %d after session 4 closed: %+v", i, tc)
		}
		if text, _ := ss[i].Message(t, late[i]); text != fmt.Sprintf("later-reply-tag-%d", i) {
			t.Fatalf("session %d: reply %q", i, text)
		}
	}
	if _, p := RuntimeOf(t, ss[2]); p != pid {
		t.Fatalf("session 2 moved to pid %d", p)
	}
}

// SharedFiveRelease releases every holder of sessions 0-3: the runtime
// (pid) stops after its idle_timeout, no process is left and the log of
// provider holds no anomaly.
func SharedFiveRelease(t *testing.T, d *daemontest.Daemon, ss []*providertest.Session, pid int, provider string) {
	t.Helper()
	for _, s := range ss[:4] {
		var rr api.ReleaseResult
		if err := s.C.Call(providertest.Ctx(t), "agentSession.release", api.ReleaseParams{SessionID: s.ID, HolderID: "e2e"}, &rr); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range ss[:4] {
		s.Next(t, event.LeaseReleased)
	}
	WaitGone(t, pid, "the runtime after every session was released")
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, provider)
}
