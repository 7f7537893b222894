package codextest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/internal/codextest"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/providertest"
)

// cancel while a command approval is open: the approval is closed before
// the turn ends interrupted (user_cancel), the command never ran, and the
// session takes the next turn.
func TestCodexCancelAtApproval(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	m := codextest.NewModel(t, codextest.Exec("call_1", "touch "+marker), codextest.Text("after"))
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
	s := providertest.NewSession(t, d, client, "codex", dir)
	turn := s.Send(t, "run it")
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	s.Cancel(t)
	res := providertest.Decode[event.ApprovalResolvedData](t, s.Next(t, event.ApprovalResolved))
	done := s.Next(t, event.TurnCompleted)
	if res.RequestID != req.RequestID || res.Decision != "cancel" {
		t.Fatalf("approval.resolved %+v", res)
	}
	if tc := providertest.Decode[event.TurnCompletedData](t, done); done.TurnID != turn || tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel {
		t.Fatalf("turn.completed %s %+v", done.TurnID, tc)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the command ran: %v", err)
	}
	next := s.Send(t, "go on")
	if tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("next turn %+v", tc)
	}
	if text, _ := s.Message(t, next); text != "after" {
		t.Fatalf("next turn said %q", text)
	}
	s.Close(t)
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, "codex")
}

// close while an approved command runs: the turn ends interrupted
// (closed), the command's item is never completed as if it succeeded,
// and nothing of the tree is left.
func TestCodexCloseDuringCommand(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	m := codextest.NewModel(t, codextest.Exec("call_1", "touch "+started+" && sleep 300"), codextest.Text("never"))
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
	s := providertest.NewSession(t, d, client, "codex", dir)
	s.Send(t, "run it")
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	s.Respond(t, req.RequestID, "approve")
	providertest.WaitFile(t, started)
	s.Close(t)
	tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if tc.Status != event.StatusInterrupted || tc.Reason != "closed" {
		t.Fatalf("turn.completed %+v", tc)
	}
	for _, ev := range s.Events() {
		if ev.Type == event.ItemCompleted {
			if it := providertest.Decode[event.ItemData](t, ev); it.Kind == event.KindCommandExecution && it.Status == event.ItemCompletedStatus {
				t.Fatalf("the killed command's item completed %+v", it)
			}
		}
	}
	s.Next(t, event.LeaseReleased)
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, "codex")
}
