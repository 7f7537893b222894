package providertest

import (
	"os"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// CancelAtApproval runs the scenario shared by the real providers: the
// turn asks approval for a command that would create marker, and cancel
// answers it. The approval is resolved cancel before turn.completed
// interrupted user_cancel, the command never ran, the next turn completes
// saying after, and close leaves no process and no anomaly.
func CancelAtApproval(t testing.TB, d *daemontest.Daemon, s *Session, provider, marker, after string) {
	t.Helper()
	turn := s.Send(t, "run it")
	req := Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	s.Cancel(t)
	res := Decode[event.ApprovalResolvedData](t, s.Next(t, event.ApprovalResolved))
	done := s.Next(t, event.TurnCompleted)
	if res.RequestID != req.RequestID || res.Decision != "cancel" {
		t.Fatalf("approval.resolved %+v", res)
	}
	if tc := Decode[event.TurnCompletedData](t, done); done.TurnID != turn || tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel {
		t.Fatalf("turn.completed %s %+v", done.TurnID, tc)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the command ran: %v", err)
	}
	next := s.Send(t, "go on")
	if tc := Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("next turn %+v", tc)
	}
	if text, _ := s.Message(t, next); text != after {
		t.Fatalf("next turn said %q, want %q", text, after)
	}
	s.Close(t)
	NoProcesses(t, d)
	NoAnomalies(t, d, provider)
}

// CloseDuringCommand runs the other shared scenario: the turn's command
// (it creates started, then sleeps) is approved, and close comes while it
// runs. The turn ends interrupted (closed), no command item is completed
// as if it succeeded, and nothing of the tree is left.
func CloseDuringCommand(t testing.TB, d *daemontest.Daemon, s *Session, provider, started string) {
	t.Helper()
	s.Send(t, "run it")
	req := Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	s.Respond(t, req.RequestID, "approve")
	WaitFile(t, started)
	s.Close(t)
	tc := Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if tc.Status != event.StatusInterrupted || tc.Reason != "closed" {
		t.Fatalf("turn.completed %+v", tc)
	}
	for _, ev := range s.Events() {
		if ev.Type == event.ItemCompleted {
			if it := Decode[event.ItemData](t, ev); it.Kind == event.KindCommandExecution && it.Status == event.ItemCompletedStatus {
				t.Fatalf("the killed command's item completed %+v", it)
			}
		}
	}
	s.Next(t, event.LeaseReleased)
	NoProcesses(t, d)
	NoAnomalies(t, d, provider)
}
