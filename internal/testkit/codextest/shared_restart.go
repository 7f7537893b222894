package codextest

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// SharedRestart is the restart scenario of a shared runtime (processes =
// "account") of provider, run by both shared tests' packages: five
// sessions on one runtime (cfg, its model m a SharedModel) each finish a
// turn "remember"; SIGKILL of the daemon; a start on the same state
// reaps the old runtime, each session's hold resumes its own thread in
// one new runtime (a new pid), and the model's next request of each
// ("which") carries that session's history alone.
func SharedRestart(t *testing.T, m *Model, cfg, client, provider string) {
	t.Helper()
	d := providertest.Daemon(t, "", cfg)
	const n = 5
	ss := make([]*providertest.Session, n)
	threads := make([]string, n)
	for i := range ss {
		ss[i] = providertest.NewSession(t, d, client, provider, t.TempDir())
		threads[i] = ss[i].Hold.ThreadID
	}
	_, pid := OneRuntime(t, ss)
	turns := make([]string, n)
	for i, s := range ss {
		turns[i] = SendPrompt(t, s, "remember", i)
	}
	for i, s := range ss {
		TurnDone(t, s, turns[i])
	}
	d.Kill()

	d2 := providertest.Daemon(t, d.StateDir, cfg)
	if providertest.Alive(pid) {
		t.Fatalf("the crashed run's runtime %d still runs once the restarted daemon listens", pid)
	}
	re := make([]*providertest.Session, n)
	for i, s := range ss {
		re[i] = providertest.ReopenResumed(t, d2, client, s.ID, threads[i])
	}
	_, pid2 := OneRuntime(t, re)
	if pid2 == pid {
		t.Fatalf("the resumed sessions run on the old pid %d", pid)
	}
	for i, s := range re {
		tn := SendPrompt(t, s, "which", i)
		if tc := TurnDone(t, s, tn); tc.Status != event.StatusCompleted {
			t.Fatalf("session %d after the restart: %+v", i, tc)
		}
	}
	seen := 0
	for _, r := range m.Requests() {
		kind, tag, _ := LastPrompt(r)
		if kind != "which" {
			continue
		}
		seen++
		in := r.Input()
		if !strings.Contains(in, "PROMPT remember "+tag) {
			t.Errorf("the %s request after the restart lacks its history", tag)
		}
		for _, other := range PromptsIn(in) {
			if other[2] != tag {
				t.Errorf("the %s request carries %q", tag, other[0])
			}
		}
	}
	if seen != n {
		t.Fatalf("%d requests after the restart, want %d", seen, n)
	}
	providertest.NoAnomalies(t, d2, provider)
}
