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
