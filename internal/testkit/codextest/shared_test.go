package codextest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
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
	ss, pid := codextest.SharedFiveTurns(t, d, m, gates["say"], client, "codex")

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

	codextest.SharedFiveCloseOne(t, m, gates["later"], ss, pid)
	codextest.SharedFiveRelease(t, d, ss, pid, "codex")
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
