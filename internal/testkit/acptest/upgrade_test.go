package acptest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// A live upgrade with a codex-acp session whose permission is pending:
// daemon.upgrade succeeds (the acp adapter hands over), the daemon's and
// the agent's pids stay, the permission answered after the exec runs the
// command, the turn ends completed with its session/prompt's answer, and
// the journal holds each event once.
func TestCodexACPLiveUpgrade(t *testing.T) {
	const version = "v0.0.0-acp-upgrade-test"
	v2 := daemontest.BinaryVersion(t, version)
	marker := filepath.Join(t.TempDir(), "ran")
	m := codextest.NewModel(t, codextest.Exec("call_1", "echo hi > "+marker), codextest.Text("all ", "done"))
	d := providertest.Daemon(t, "", codexACP(t, "codex-acp", m))
	s := providertest.NewSession(t, d, client, "codex-acp", t.TempDir())
	before := d.Status(t)
	s.Send(t, "run it")
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))

	var res api.UpgradeResult
	if err := s.C.Call(providertest.Ctx(t), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade with a codex-acp session mid-turn: %v\n%s", err, d.Log.String())
	}
	if res.PID != before.PID || res.ToVersion != version {
		t.Fatalf("upgrade answered %+v; before: pid %d", res, before.PID)
	}
	s2 := providertest.Reopen(t, d, client, s.ID)
	if s2.Hold.PID != s.Hold.PID || s2.Hold.ThreadID != s.Hold.ThreadID {
		t.Fatalf("after the upgrade: pid %d thread %s, before %d %s", s2.Hold.PID, s2.Hold.ThreadID, s.Hold.PID, s.Hold.ThreadID)
	}
	s2.Respond(t, req.RequestID, "approve")
	done := providertest.Decode[event.TurnCompletedData](t, s2.Next(t, event.TurnCompleted))
	if done.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v", done)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the command approved after the upgrade did not run: %v", err)
	}
	all := typesOf(s2.ReadAll(t))
	for _, typ := range []string{event.TurnStarted, event.ApprovalRequested, event.ApprovalResolved, event.TurnCompleted, event.MessageCompleted} {
		if n := strings.Count(","+all+",", ","+typ+","); n != 1 {
			t.Fatalf("%d %s in the journal: %s", n, typ, all)
		}
	}
	s2.Close(t)
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, "codex-acp")
}

// A live upgrade with two codex-acp sessions on one shared runtime, one
// with its permission pending and one with its turn held at the model:
// daemon.upgrade succeeds (the runtime is handed over), both sessions
// keep the runtime's pid, the permission answered after the exec runs the
// command and ends its turn, the held turn completes with its own reply,
// each journal holds each event once, and a new turn runs in the adopted
// runtime.
func TestCodexACPSharedLiveUpgrade(t *testing.T) {
	const version = "v0.0.0-acp-shared-upgrade-test"
	v2 := daemontest.BinaryVersion(t, version)
	gate := make(chan struct{})
	m := codextest.SharedModel(t, func(kind string) chan struct{} {
		if kind == "say" {
			return gate
		}
		return nil
	})
	d := providertest.Daemon(t, "", sharedACP(t, "codex-acp", m))
	ss := []*providertest.Session{providertest.NewSession(t, d, client, "codex-acp", t.TempDir()),
		providertest.NewSession(t, d, client, "codex-acp", t.TempDir())}
	rt, pid := codextest.OneRuntime(t, ss)
	codextest.SendPrompt(t, ss[0], "run", 0)
	req := providertest.Decode[event.ApprovalRequestedData](t, ss[0].Next(t, event.ApprovalRequested))
	held := codextest.SendPrompt(t, ss[1], "say", 1)
	codextest.Arrivals(t, m, 2)

	var res api.UpgradeResult
	if err := ss[0].C.Call(providertest.Ctx(t), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
		t.Fatalf("upgrade with a shared codex-acp runtime mid-turn: %v\n%s", err, d.Log.String())
	}
	if res.ToVersion != version {
		t.Fatalf("upgrade answered %+v", res)
	}
	re := []*providertest.Session{providertest.Reopen(t, d, client, ss[0].ID), providertest.Reopen(t, d, client, ss[1].ID)}
	if rt2, pid2 := codextest.OneRuntime(t, re); rt2 != rt || pid2 != pid {
		t.Fatalf("after the upgrade: runtime %s pid %d, before %s %d", rt2, pid2, rt, pid)
	}
	re[0].Respond(t, req.RequestID, "approve")
	if tc := providertest.Decode[event.TurnCompletedData](t, re[0].Next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("session 0 after the upgrade: %+v; %s", tc, re[0].Types())
	}
	close(gate)
	if tc := codextest.TurnDone(t, re[1], held); tc.Status != event.StatusCompleted {
		t.Fatalf("session 1's held turn after the upgrade: %+v", tc)
	}
	if text, _ := re[1].Message(t, held); text != "say-reply-tag-1" {
		t.Fatalf("session 1's reply %q", text)
	}
	for i, s := range re {
		all := typesOf(s.ReadAll(t))
		for _, typ := range []string{event.TurnStarted, event.TurnCompleted, event.MessageCompleted} {
			if n := strings.Count(","+all+",", ","+typ+","); n != 1 {
				t.Fatalf("session %d: %d %s in the journal: %s", i, n, typ, all)
			}
		}
		codextest.OnlyOwnTags(t, s, []string{"tag-0", "tag-1"}[i])
	}
	if tn := codextest.SendPrompt(t, re[1], "again", 1); codextest.TurnDone(t, re[1], tn).Status != event.StatusCompleted {
		t.Fatalf("a turn in the adopted runtime: %s", re[1].Types())
	}
	for _, s := range re {
		s.Close(t)
	}
	providertest.NoAnomalies(t, d, "codex-acp")
}
