package codextest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// (a) A turn with streamed text: every delta arrives as message.delta
// with the item's id, the whole text as message.completed, then
// turn.completed; no anomaly is logged for codex's ordinary notifications.
func TestCodexStreamedText(t *testing.T) {
	m := codextest.NewModel(t, codextest.Text("Hel", "lo ", "world"))
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	turn := s.Send(t, "say hello")
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if done.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v", done)
	}
	text, completed := s.Message(t, turn)
	if text != "Hello world" || completed != "Hello world" {
		t.Fatalf("deltas %q, completed %q; events %s", text, completed, s.Types())
	}
	if !strings.Contains(s.Types(), event.TurnUsage) {
		t.Errorf("no turn.usage in %s", s.Types())
	}
	providertest.NoAnomalies(t, d, "codex")
}

// (b, c) A command the model runs asks for approval first. Approved, it
// runs and its output streams; denied, it never runs (the file system
// says so) and its item ends declined.
func TestCodexCommandApproval(t *testing.T) {
	for _, decision := range []string{"approve", "deny"} {
		t.Run(decision, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "ran")
			m := codextest.NewModel(t, codextest.Exec("call_1", "echo hi > "+marker+" && for i in 1 2 3; do echo line$i; sleep 0.2; done && echo done"), codextest.Text("all ", "done"))
			d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
			s := providertest.NewSession(t, d, client, "codex", t.TempDir())
			s.Send(t, "run it")
			started := providertest.Decode[event.ItemData](t, s.Next(t, event.ItemStarted))
			req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
			if started.Kind != event.KindCommandExecution || req.Kind != "command" || req.ItemID != started.ItemID ||
				strings.Join(req.Options, ",") != "approve,approveForSession,deny,cancel" {
				t.Fatalf("item.started %+v, approval.requested %+v", started, req)
			}
			s.Respond(t, req.RequestID, decision)
			item := s.Next(t, event.ItemCompleted)
			done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
			it := providertest.Decode[event.ItemData](t, item)
			p := it.Payload.(map[string]any)
			output := ""
			for _, ev := range s.Events() {
				if ev.Type == event.ItemDelta {
					if dd := providertest.Decode[event.ItemDeltaData](t, ev); dd.ItemID == it.ItemID && dd.Stream == event.StreamOutput {
						output += dd.Text
					}
				}
			}
			_, statErr := os.Stat(marker)
			switch decision {
			case "approve":
				// The command runs for a while: its output streams as deltas
				// before the item completes with all of it. (codex folds the
				// first ~250 ms of output into the call's start and streams
				// the rest: the deltas are a suffix of the whole.)
				all := fmt.Sprint(p["output"])
				if it.Status != event.ItemCompletedStatus || p["exitCode"] != float64(0) || output == "" ||
					!strings.HasSuffix(all, output) || all != "line1\nline2\nline3\ndone\n" || statErr != nil {
					t.Fatalf("approved: item %+v, output %q, marker %v", it, output, statErr)
				}
			case "deny":
				if it.Status != event.ItemDeclinedStatus || output != "" || !os.IsNotExist(statErr) {
					t.Fatalf("denied: item %+v, output %q, marker %v", it, output, statErr)
				}
			}
			if done.Status != event.StatusCompleted {
				t.Fatalf("turn.completed %+v", done)
			}
			msg := providertest.Decode[event.DeltaData](t, providertest.LastOf(t, s.Events(), event.MessageCompleted))
			if msg.Text != "all done" {
				t.Fatalf("final message %q", msg.Text)
			}
			if n := len(m.Requests()); n != 2 {
				t.Fatalf("model saw %d requests, want 2 (the call, then its output)", n)
			}
			providertest.NoAnomalies(t, d, "codex")
		})
	}
}

// (d) cancel while the model stream is stalled: the turn ends interrupted
// with user_cancel.
func TestCodexCancelStalled(t *testing.T) {
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	m := codextest.NewModel(t, codextest.Reply{Stall: stall})
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	s.Send(t, "think hard")
	providertest.WaitArrived(t, m.Arrived())
	s.Cancel(t)
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if done.Status != event.StatusInterrupted || done.Reason != event.ReasonUserCancel {
		t.Fatalf("turn.completed %+v", done)
	}
}

// (e) SIGKILL of the codex process mid-turn, its approval open — the
// launcher (the session's root) or the native app-server behind it: the
// approval is cancelled, then the turn ends interrupted (provider_exited),
// and nothing of the session's tree is left.
func TestCodexKilledMidTurn(t *testing.T) {
	for _, victim := range []string{"launcher", "native"} {
		t.Run(victim, func(t *testing.T) {
			m := codextest.NewModel(t, codextest.Exec("call_1", "echo never"))
			d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
			s := providertest.NewSession(t, d, client, "codex", t.TempDir())
			s.Send(t, "run it")
			req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
			pid := s.Hold.PID
			if victim == "native" {
				pid = childOf(t, pid)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			res := s.Next(t, event.ApprovalResolved)
			done := s.Next(t, event.TurnCompleted)
			got := providertest.Decode[event.ApprovalResolvedData](t, res)
			if got.RequestID != req.RequestID || got.Decision != "cancel" || got.By != "daemon" || got.Reason != "provider_exited" {
				t.Fatalf("approval.resolved %+v", got)
			}
			if tc := providertest.Decode[event.TurnCompletedData](t, done); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonProviderExited {
				t.Fatalf("turn.completed %+v", tc)
			}
			s.Next(t, event.LeaseReleased)
			providertest.NoProcesses(t, d)
		})
	}
}

// childOf returns the one child process of pid (the native codex behind
// the Node launcher).
func childOf(t *testing.T, pid int) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		st := string(b)
		i := strings.LastIndexByte(st, ')')
		if f := strings.Fields(st[i+1:]); len(f) > 1 && f[1] == fmt.Sprint(pid) {
			var child int
			fmt.Sscan(e.Name(), &child)
			return child
		}
	}
	t.Fatalf("no child of %d", pid)
	return 0
}

// A model answering HTTP 500: the turn fails (provider_error) with
// codex's message, and the session takes the next turn.
func TestCodexModelError(t *testing.T) {
	m := codextest.NewModel(t, codextest.Reply{Status: 500}, codextest.Text("fine ", "now"))
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	s.Send(t, "fail please")
	tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if tc.Status != event.StatusFailed || tc.Reason != event.ReasonProviderError || tc.Error == "" {
		t.Fatalf("turn.completed %+v", tc)
	}
	s.Send(t, "again")
	if tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("the next turn: %+v", tc)
	}
	providertest.NoAnomalies(t, d, "codex")
}

// A dropped model stream codex retries: its `error` {willRetry} is
// journaled as a provider.notice and the turn completes.
func TestCodexRetriedModelError(t *testing.T) {
	m := codextest.NewModel(t, codextest.Reply{Drop: true}, codextest.Text("after ", "retry"))
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.HomeRetrying(t, m.URL)))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	s.Send(t, "hello")
	tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if tc.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v; events %s", tc, s.Types())
	}
	var retried bool
	for _, ev := range s.Events() {
		if ev.Type == event.ProviderNotice && providertest.Decode[event.NoticeData](t, ev).Code == "retrying" {
			retried = true
		}
	}
	if !retried {
		t.Fatalf("no retrying notice in %s", s.Types())
	}
}
