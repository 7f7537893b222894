package codextest_test

import (
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// TestCodexSharedUpgrade: a live upgrade hands a shared codex runtime
// over: three sessions on one app-server, a turn held at the model on
// one and a command approval open on another. After daemon.upgrade the
// same runtime (id and pid) serves the three; the held turn completes
// with its whole reply, the approval answered after the exec reaches
// codex and completes its turn, a new session's hold goes into the same
// runtime and runs a turn, every journal is gapless, and once all are
// released the runtime stops after idle_timeout.
func TestCodexSharedUpgrade(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, "v0.0.0-upgrade-test")
	gates := map[string]chan struct{}{"say": make(chan struct{})}
	m := codextest.SharedModel(t, func(kind string) chan struct{} { return gates[kind] })
	d := providertest.Daemon(t, "", "idle_timeout = \"3s\"", sharedProviderConfig(t, "codex", codextest.Home(t, m.URL, "")))
	const n = 3
	ss := make([]*providertest.Session, n)
	for i := range ss {
		ss[i] = providertest.NewSession(t, d, client, "codex", t.TempDir())
	}
	runtimeID, pid := codextest.OneRuntime(t, ss)

	say := codextest.SendPrompt(t, ss[0], "say", 0)
	codextest.Arrivals(t, m, 1)
	run := codextest.SendPrompt(t, ss[1], "run", 1)
	req := providertest.Decode[event.ApprovalRequestedData](t, ss[1].Next(t, event.ApprovalRequested))

	var res api.UpgradeResult
	if err := d.Client(t).Call(providertest.Ctx(t), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
	}
	re := make([]*providertest.Session, n)
	for i, s := range ss {
		re[i] = providertest.Reopen(t, d, client, s.ID)
	}
	if id, p := codextest.OneRuntime(t, re); id != runtimeID || p != pid {
		t.Fatalf("after the upgrade: runtime %s pid %d; before: %s pid %d", id, p, runtimeID, pid)
	}

	close(gates["say"])
	if tc := codextest.TurnDone(t, re[0], say); tc.Status != event.StatusCompleted {
		t.Fatalf("the turn held across the upgrade: %+v", tc)
	}
	if text, _ := re[0].Message(t, say); text != "say-reply-tag-0" {
		t.Fatalf("the turn held across the upgrade replied %q", text)
	}
	re[1].Respond(t, req.RequestID, "approve")
	if tc := codextest.TurnDone(t, re[1], run); tc.Status != event.StatusCompleted {
		t.Fatalf("the turn whose approval was answered after the upgrade: %+v", tc)
	}
	if text, _ := re[1].Message(t, run); text != "ran-tag-1" {
		t.Fatalf("after the approval: reply %q", text)
	}

	fresh := providertest.NewSession(t, d, client, "codex", t.TempDir())
	if id, p := codextest.RuntimeOf(t, fresh); id != runtimeID || p != pid {
		t.Fatalf("a hold after the upgrade: runtime %s pid %d, want %s pid %d", id, p, runtimeID, pid)
	}
	if tc := codextest.TurnDone(t, fresh, codextest.SendPrompt(t, fresh, "after", 3)); tc.Status != event.StatusCompleted {
		t.Fatalf("a new session's turn after the upgrade: %+v", tc)
	}
	for i, s := range append(re, fresh) {
		for j, ev := range s.ReadAll(t) {
			if ev.Seq != uint64(j+1) {
				t.Fatalf("session %d: event %d has seq %d", i, j, ev.Seq)
			}
			if ev.Type == event.ProviderExited || ev.Type == event.SessionEnded {
				t.Fatalf("session %d: %s at seq %d: %s", i, ev.Type, ev.Seq, ev.Data)
			}
		}
		codextest.OnlyOwnTags(t, s, fmt.Sprintf("tag-%d", i))
	}

	for _, s := range append(re, fresh) {
		var rr api.ReleaseResult
		if err := s.C.Call(providertest.Ctx(t), "agentSession.release", api.ReleaseParams{SessionID: s.ID, HolderID: "e2e"}, &rr); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range append(re, fresh) {
		s.Next(t, event.LeaseReleased)
	}
	codextest.WaitGone(t, pid, "the adopted runtime after every session was released")
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, "codex")
}
