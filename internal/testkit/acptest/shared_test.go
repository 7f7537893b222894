package acptest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// Five sessions on one codex-acp process (one runtime id, one pid): five
// turns in flight at once (the model holds all five requests), each reply
// only in its own journal; a permission open on one while another's turn
// streams and completes; closing one mid-turn ends only its turn, the
// others' turns complete on the same process, which takes new turns; once every session is
// released the runtime stops after idle_timeout and no process is left.
func TestCodexACPSharedFive(t *testing.T) {
	gates := map[string]chan struct{}{"say": make(chan struct{}), "later": make(chan struct{})}
	m := codextest.SharedModel(t, func(kind string) chan struct{} { return gates[kind] })
	d := providertest.Daemon(t, "", "idle_timeout = \"1s\"", sharedACP(t, "codex-acp", m))
	ss, pid := codextest.SharedFiveTurns(t, d, m, gates["say"], client, "codex-acp")

	// A permission open on session 0 while session 1 streams a turn.
	codextest.SendPrompt(t, ss[0], "run", 0)
	req := providertest.Decode[event.ApprovalRequestedData](t, ss[0].Next(t, event.ApprovalRequested))
	t1 := codextest.SendPrompt(t, ss[1], "more", 1)
	if tc := codextest.TurnDone(t, ss[1], t1); tc.Status != event.StatusCompleted {
		t.Fatalf("session 1 while 0 waits for its permission: %+v", tc)
	}
	if strings.Contains(ss[0].Types(), event.ApprovalResolved) || strings.Contains(ss[1].Types(), event.ApprovalRequested) {
		t.Fatalf("session 0's permission leaked: 0 %s / 1 %s", ss[0].Types(), ss[1].Types())
	}
	ss[0].Respond(t, req.RequestID, "approve")
	if tc := providertest.Decode[event.TurnCompletedData](t, ss[0].Next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("session 0 after approve: turn %+v; events %s", tc, ss[0].Types())
	}
	for i, s := range ss[:2] {
		codextest.OnlyOwnTags(t, s, fmt.Sprintf("tag-%d", i))
	}

	codextest.SharedFiveCloseOne(t, m, gates["later"], ss, pid)
	// A new turn after the close: the process still takes prompts.
	if tn := codextest.SendPrompt(t, ss[0], "after", 0); codextest.TurnDone(t, ss[0], tn).Status != event.StatusCompleted {
		t.Fatalf("a turn of session 0 after session 4 closed: %s", ss[0].Types())
	}
	codextest.SharedFiveRelease(t, d, ss, pid, "codex-acp")
}

// SIGKILL of the codex-acp runtime with two of its three sessions
// mid-turn: each of the two gets turn.completed {interrupted,
// provider_exited} then its tail; the idle third gets the tail without a
// turn; no session's journal has another's events; the next hold starts a
// new runtime, which the others join, and session/load gives each its
// own history there.
func TestCodexACPSharedKillMidTurn(t *testing.T) {
	gate := make(chan struct{}) // never opened before the kill
	m := codextest.SharedModel(t, func(kind string) chan struct{} {
		if kind == "say" {
			return gate
		}
		return nil
	})
	d := providertest.Daemon(t, "", sharedACP(t, "codex-acp", m))
	ss := codextest.SharedKillMidTurn(t, d, m, gate, client, "codex-acp")
	for i, s := range ss {
		tn := codextest.SendPrompt(t, s, "again", i)
		if tc := codextest.TurnDone(t, s, tn); tc.Status != event.StatusCompleted {
			t.Fatalf("session %d: a turn on the new runtime: %+v", i, tc)
		}
		codextest.OnlyOwnTags(t, s, fmt.Sprintf("tag-%d", i))
	}
	seen := 0
	for _, r := range m.Requests() {
		kind, tag, _ := codextest.LastPrompt(r)
		if kind != "again" {
			continue
		}
		seen++
		for _, other := range codextest.PromptsIn(r.Input()) {
			if other[2] != tag {
				t.Errorf("the %s request after the reload carries %q", tag, other[0])
			}
		}
		if tag != "tag-2" && !strings.Contains(r.Input(), "PROMPT say "+tag) {
			t.Errorf("the %s request after the reload lacks its history", tag)
		}
	}
	if seen != len(ss) {
		t.Fatalf("%d requests after the reload, want %d", seen, len(ss))
	}
}

// SIGKILL of the daemon with five codex-acp sessions on one runtime, then
// a start on the same state: the old runtime is reaped, each session's
// hold loads its own ACP session (session/load) in one new runtime, and
// the model's next request of each carries that session's history alone.
func TestCodexACPSharedRestart(t *testing.T) {
	m := codextest.SharedModel(t, nil)
	cfg := sharedACP(t, "codex-acp", m)
	codextest.SharedRestart(t, m, cfg, client, "codex-acp")
}

// Closing a session of a shared codex-acp runtime kills what is left of
// its own commands (codex-acp runs codex, which marks each with
// CODEX_THREAD_ID = the ACP sessionId): each of two sessions leaves a
// detached process behind an approved command; closing the first stops
// its process only: the second's and the runtime run on.
func TestCodexACPSharedCloseKillsLeftovers(t *testing.T) {
	m := codextest.SharedModel(t, nil)
	d := providertest.Daemon(t, "", "idle_timeout = \"1s\"", sharedACP(t, "codex-acp", m))
	ss := codextest.SharedCloseKillsLeftovers(t, d, client, "codex-acp")
	ss[1].Close(t)
	providertest.NoProcesses(t, d) // the runtime's release clock takes it, and session 1's leftover with its tree
}

// Releasing one session of a shared codex-acp runtime closes its ACP
// session in the agent (session/close: codex-acp serves it) while the
// other keeps the process; holding it again loads it (session/load) into
// the same process, and its next model request carries its earlier turn
// (and nothing of the other session's).
func TestCodexACPSharedReleaseAndReload(t *testing.T) {
	m := codextest.SharedModel(t, nil)
	d := providertest.Daemon(t, "", "idle_timeout = \"1s\"", sharedACP(t, "codex-acp", m))
	ss := []*providertest.Session{
		providertest.NewSession(t, d, client, "codex-acp", t.TempDir()),
		providertest.NewSession(t, d, client, "codex-acp", t.TempDir()),
	}
	_, pid := codextest.OneRuntime(t, ss)
	for i, s := range ss {
		codextest.TurnDone(t, s, codextest.SendPrompt(t, s, "remember", i))
	}
	thread := ss[0].Hold.ThreadID
	var rr api.ReleaseResult
	if err := ss[0].C.Call(providertest.Ctx(t), "agentSession.release", api.ReleaseParams{SessionID: ss[0].ID, HolderID: "e2e"}, &rr); err != nil {
		t.Fatal(err)
	}
	ss[0].Next(t, event.LeaseReleased)
	if log := d.Log.String(); strings.Contains(log, "detach thread") || !strings.Contains(log, "ACP session closed in the agent") {
		t.Fatalf("no session/close answered for the released session:\n%s", log)
	}
	re := providertest.ReopenResumed(t, d, client, ss[0].ID, thread)
	if _, p := codextest.RuntimeOf(t, re); p != pid {
		t.Fatalf("the reloaded session is on pid %d, the runtime's is %d", p, pid)
	}
	if tc := codextest.TurnDone(t, re, codextest.SendPrompt(t, re, "which", 0)); tc.Status != event.StatusCompleted {
		t.Fatalf("a turn of the reloaded session: %+v; %s", tc, re.Types())
	}
	rs := m.Requests()
	in := rs[len(rs)-1].Input()
	if !strings.Contains(in, "PROMPT remember tag-0") || strings.Contains(in, "tag-1") {
		t.Fatalf("the reloaded session's model request: %s", in)
	}
	if tc := codextest.TurnDone(t, ss[1], codextest.SendPrompt(t, ss[1], "still", 1)); tc.Status != event.StatusCompleted {
		t.Fatalf("the other session: %+v", tc)
	}
	providertest.NoAnomalies(t, d, "codex-acp")
}
