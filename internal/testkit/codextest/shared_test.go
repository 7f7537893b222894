package codextest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// The tests below run the built-in codex profile's default,
// processes = "account": every session of the profile is a thread of one
// codex app-server (one runtime). Their sessions run turns at once, so
// the model answers by what each request asks (sharedModel), not in
// script order.

// Five sessions on one codex runtime (one runtime id, one pid): five
// turns in flight at once (the model holds all five requests), each
// reply only in its own journal; a command approval on one stays open
// while another's turn streams and completes; closing one mid-turn ends
// only its turn, the others' turns complete on the same process; once
// every session is released the runtime stops after idle_timeout and no
// process is left.
func TestCodexSharedFive(t *testing.T) {
	gates := map[string]chan struct{}{"say": make(chan struct{}), "later": make(chan struct{})}
	m := codextest.SharedModel(t, func(kind string) chan struct{} { return gates[kind] })
	d := providertest.Daemon(t, "", "idle_timeout = \"1s\"", sharedProviderConfig(t, "codex", codextest.Home(t, m.URL, "")))
	const n = 5
	ss := make([]*providertest.Session, n)
	for i := range ss {
		ss[i] = providertest.NewSession(t, d, client, "codex", t.TempDir())
	}
	_, pid := codextest.OneRuntime(t, ss)
	if tagged := daemontest.TaggedProcesses(d.StateID); !contains(tagged, pid) {
		t.Fatalf("tagged processes %v lack the runtime %d", tagged, pid)
	}

	// Five concurrent turns: all five requests reach the model before
	// any is answered.
	turns := make([]string, n)
	for i, s := range ss {
		turns[i] = codextest.SendPrompt(t, s, "say", i)
	}
	codextest.Arrivals(t, m, n)
	close(gates["say"])
	for i, s := range ss {
		if tc := codextest.TurnDone(t, s, turns[i]); tc.Status != event.StatusCompleted {
			t.Fatalf("session %d: turn.completed %+v", i, tc)
		}
		if text, _ := s.Message(t, turns[i]); text != fmt.Sprintf("say-reply-tag-%d", i) {
			t.Fatalf("session %d: reply %q", i, text)
		}
		codextest.OnlyOwnTags(t, s, fmt.Sprintf("tag-%d", i))
	}

	// An approval open on session 0 while session 1 streams a turn.
	codextest.SendPrompt(t, ss[0], "run", 0)
	req := providertest.Decode[event.ApprovalRequestedData](t, ss[0].Next(t, event.ApprovalRequested))
	t1 := codextest.SendPrompt(t, ss[1], "more", 1)
	if tc := codextest.TurnDone(t, ss[1], t1); tc.Status != event.StatusCompleted {
		t.Fatalf("session 1 while 0 waits for approval: %+v", tc)
	}
	if strings.Contains(ss[0].Types(), event.ApprovalResolved) {
		t.Fatalf("session 0's approval resolved by session 1's turn: %s", ss[0].Types())
	}
	ss[0].Respond(t, req.RequestID, "approve")
	item := providertest.Decode[event.ItemData](t, ss[0].Next(t, event.ItemCompleted))
	if tc := providertest.Decode[event.TurnCompletedData](t, ss[0].Next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted ||
		item.Status != event.ItemCompletedStatus {
		t.Fatalf("session 0 after approve: item %+v turn %+v", item, tc)
	}
	for i, s := range ss[:2] {
		codextest.OnlyOwnTags(t, s, fmt.Sprintf("tag-%d", i))
	}

	// Sessions 2, 3 and 4 in turns; closing 4 ends only its own.
	late := map[int]string{}
	for i := 2; i < n; i++ {
		late[i] = codextest.SendPrompt(t, ss[i], "later", i)
	}
	codextest.Arrivals(t, m, 3)
	ss[4].Close(t)
	if tc := codextest.TurnDone(t, ss[4], late[4]); tc.Status != event.StatusInterrupted {
		t.Fatalf("the closed session's turn: %+v", tc)
	}
	ss[4].Next(t, event.LeaseReleased)
	if !providertest.Alive(pid) {
		t.Fatal("closing one session stopped the runtime")
	}
	close(gates["later"])
	for i := 2; i < 4; i++ {
		if tc := codextest.TurnDone(t, ss[i], late[i]); tc.Status != event.StatusCompleted {
			t.Fatalf("session %d after session 4 closed: %+v", i, tc)
		}
		if text, _ := ss[i].Message(t, late[i]); text != fmt.Sprintf("later-reply-tag-%d", i) {
			t.Fatalf("session %d: reply %q", i, text)
		}
	}
	if _, p := codextest.RuntimeOf(t, ss[2]); p != pid {
		t.Fatalf("session 2 moved to pid %d", p)
	}

	// Release every holder: the runtime stops after its idle_timeout.
	for _, s := range ss[:4] {
		var rr api.ReleaseResult
		if err := s.C.Call(providertest.Ctx(t), "agentSession.release", api.ReleaseParams{SessionID: s.ID, HolderID: "e2e"}, &rr); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range ss[:4] {
		s.Next(t, event.LeaseReleased)
	}
	codextest.WaitGone(t, pid, "the runtime after every session was released")
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, "codex")
}

func contains(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// SIGKILL of the codex runtime with two of its three sessions mid-turn:
// each of the two gets turn.completed {interrupted, provider_exited}
// then its tail; the idle third gets the tail without a turn; no
// session's journal has another's events; the next hold starts a new
// runtime, which the others join.
func TestCodexSharedKillMidTurn(t *testing.T) {
	gate := make(chan struct{}) // never opened before the kill
	m := codextest.SharedModel(t, func(string) chan struct{} { return gate })
	d := providertest.Daemon(t, "", sharedProviderConfig(t, "codex", codextest.Home(t, m.URL, "")))
	ss := codextest.SharedKillMidTurn(t, d, m, gate, client, "codex")
	tn := codextest.SendPrompt(t, ss[2], "again", 2)
	if tc := codextest.TurnDone(t, ss[2], tn); tc.Status != event.StatusCompleted {
		t.Fatalf("a turn on the new runtime: %+v", tc)
	}
}

// SIGKILL of the daemon with five codex sessions on one runtime, then a
// start on the same state: the old runtime is reaped, each session's
// hold resumes its own thread in one new runtime, and the model's next
// request of each carries that session's history alone.
func TestCodexSharedRestart(t *testing.T) {
	m := codextest.SharedModel(t, nil)
	cfg := sharedProviderConfig(t, "codex", codextest.Home(t, m.URL, ""))
	codextest.SharedRestart(t, m, cfg, client, "codex")
}

// Closing a session of a shared codex runtime kills what is left of its
// own commands (codex marks each with CODEX_THREAD_ID): each of two
// sessions leaves a detached process behind an approved command; closing
// the first stops its process only: the second's and the runtime run on.
func TestCodexSharedCloseKillsLeftovers(t *testing.T) {
	m := codextest.SharedModel(t, nil)
	d := providertest.Daemon(t, "", sharedProviderConfig(t, "codex", codextest.Home(t, m.URL, "")))
	codextest.SharedCloseKillsLeftovers(t, d, client, "codex")
}
