package claudetest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/internal/claudetest"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/providertest"
)

// cancel while a Bash approval is open: the approval is closed before the
// turn ends interrupted (user_cancel), the command never ran, and the
// session takes the next turn.
func TestClaudeCancelAtApproval(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", "touch "+marker), claudetest.Text("after"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", dir)
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
	providertest.NoAnomalies(t, d, "claude")
}

// close while an approved command runs: the turn ends interrupted
// (closed), the command's shell is gone with the CLI, nothing is left.
func TestClaudeCloseDuringCommand(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", "touch "+started+" && sleep 300"), claudetest.Text("never"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", dir)
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
			if it := providertest.Decode[event.ItemData](t, ev); it.ItemID == "toolu_1" && it.Status == event.ItemCompletedStatus {
				t.Fatalf("the killed command's item completed %+v", it)
			}
		}
	}
	s.Next(t, event.LeaseReleased)
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, "claude")
}
