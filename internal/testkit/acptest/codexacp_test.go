package acptest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/acptest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// client names the tests' clients of the daemon.
const client = "acp-e2e"

// codexACP is a daemon config running the pinned codex-acp as `name`
// against the model server m.
func codexACP(t *testing.T, name string, m *codextest.Model) string {
	return acptest.CodexACPTable(name, acptest.CodexACP(t), acptest.CodexHome(t, m.URL), t.TempDir())
}

// A turn of streamed text through the real daemon and codex-acp: every
// delta as message.delta, the whole as message.completed, turn.completed
// {completed, stopReason end_turn}; no anomaly for its ordinary traffic.
func TestCodexACPStreamedText(t *testing.T) {
	m := codextest.NewModel(t, codextest.Text("Hel", "lo ", "world"))
	d := providertest.Daemon(t, "", codexACP(t, "codex-acp", m))
	s := providertest.NewSession(t, d, client, "codex-acp", t.TempDir())
	turn := s.Send(t, "say hello")
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if done.Status != event.StatusCompleted || done.StopReason != "end_turn" {
		t.Fatalf("turn.completed %+v; events %s", done, s.Types())
	}
	text, completed := s.Message(t, turn)
	if text != "Hello world" || completed != "Hello world" {
		t.Fatalf("deltas %q, completed %q; events %s", text, completed, s.Types())
	}
	t.Logf("events %s", s.Types())
	s.Close(t)
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, "codex-acp")
}

// A command the model runs asks permission first. Approved, it runs (its
// file exists) and its item completes; denied, it never runs, its item is
// not completed, and codex-acp ends the turn (approval_denied).
func TestCodexACPPermission(t *testing.T) {
	for _, decision := range []string{"approve", "deny"} {
		t.Run(decision, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			m := codextest.NewModel(t, codextest.Exec("call_1", "echo hi > "+marker+" && echo visible"), codextest.Text("all ", "done"))
			d := providertest.Daemon(t, "", codexACP(t, "codex-acp", m))
			s := providertest.NewSession(t, d, client, "codex-acp", t.TempDir())
			s.Send(t, "run it")
			req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
			if req.Kind != "command" || req.ItemID == "" || !slices.Contains(req.Options, "approve") || !slices.Contains(req.Options, "deny") {
				t.Fatalf("approval.requested %+v; events %s", req, s.Types())
			}
			s.Respond(t, req.RequestID, decision)
			done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
			var item event.ItemData
			for _, ev := range s.Events() {
				if ev.Type == event.ItemCompleted {
					if it := providertest.Decode[event.ItemData](t, ev); it.ItemID == req.ItemID {
						item = it
					}
				}
			}
			_, statErr := os.Stat(marker)
			switch decision {
			case "approve":
				// The call's pending content (codex-acp's permission prompt)
				// is no output: what the command printed is.
				p, _ := item.Payload.(map[string]any)
				if statErr != nil || item.Kind != event.KindCommandExecution || item.Status != event.ItemCompletedStatus ||
					p["output"] != "visible\n" || p["exitCode"] != float64(0) || !strings.Contains(fmt.Sprint(p["command"]), "echo hi") {
					t.Fatalf("approved: marker %v, item %+v; events %s", statErr, item, s.Types())
				}
				if done.Status != event.StatusCompleted {
					t.Fatalf("turn.completed %+v", done)
				}
			case "deny":
				// codex-acp ends the turn itself on a denial (stopReason
				// cancelled): interrupted, approval_denied.
				if !os.IsNotExist(statErr) || item.Status == event.ItemCompletedStatus {
					t.Fatalf("denied: marker %v, item %+v; events %s", statErr, item, s.Types())
				}
				if done.Status != event.StatusInterrupted || done.Reason != event.ReasonApprovalDenied || done.StopReason != "cancelled" {
					t.Fatalf("turn.completed %+v", done)
				}
			}
			t.Logf("%s: item %s %s; events %s", decision, item.Kind, item.Status, s.Types())
			s.Close(t)
			providertest.NoProcesses(t, d)
			providertest.NoAnomalies(t, d, "codex-acp")
		})
	}
}

// Cancel while the model stream is stalled: session/cancel, and the turn
// ends interrupted (user_cancel).
func TestCodexACPCancelMidStream(t *testing.T) {
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	m := codextest.NewModel(t, codextest.Reply{Stall: stall})
	d := providertest.Daemon(t, "", codexACP(t, "codex-acp", m))
	s := providertest.NewSession(t, d, client, "codex-acp", t.TempDir())
	s.Send(t, "think hard")
	providertest.WaitArrived(t, m.Arrived())
	s.Cancel(t)
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if done.Status != event.StatusInterrupted || done.Reason != event.ReasonUserCancel || done.StopReason != "cancelled" {
		t.Fatalf("turn.completed %+v", done)
	}
	s.Close(t)
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, "codex-acp")
}

// Cancel while a permission is pending: the permission is answered
// cancelled, the command never runs, the turn ends interrupted
// (user_cancel), the next turn works, nothing is left running.
func TestCodexACPCancelAtPermission(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	m := codextest.NewModel(t, codextest.Exec("call_1", "echo hi > "+marker), codextest.Text("after"))
	d := providertest.Daemon(t, "", codexACP(t, "codex-acp", m))
	s := providertest.NewSession(t, d, client, "codex-acp", t.TempDir())
	providertest.CancelAtApproval(t, d, s, "codex-acp", marker, "after")
}

// A daemon restart, then a re-hold: session/load of the same session; the
// history codex-acp replays is not journaled again, and the model sees
// the earlier turn in the next request.
func TestCodexACPLoadAfterRestart(t *testing.T) {
	m := codextest.NewModel(t, codextest.Text("noted"), codextest.Text("apple"))
	cfg := codexACP(t, "codex-acp", m)
	d := providertest.Daemon(t, "", cfg)
	s := providertest.NewSession(t, d, client, "codex-acp", t.TempDir())
	s.Send(t, "remember the word pineapple-42")
	s.Next(t, event.TurnCompleted)
	thread := s.Hold.ThreadID
	before := len(s.ReadAll(t))
	d.Stop()

	d2 := providertest.Daemon(t, d.StateDir, cfg)
	s2 := providertest.ReopenResumed(t, d2, client, s.ID, thread)
	s2.Send(t, "which word?")
	s2.Next(t, event.TurnCompleted)
	reqs := m.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Input(), "pineapple-42") {
		t.Fatalf("the model's second request does not carry the first turn: %d requests", len(reqs))
	}
	all := s2.ReadAll(t)
	for _, ev := range all[before:] {
		if strings.Contains(string(ev.Data), "noted") || strings.Contains(string(ev.Data), "pineapple") && ev.Type != event.TurnStarted {
			t.Fatalf("the load's replay was journaled: %s %s", ev.Type, ev.Data)
		}
	}
	if n := strings.Count(typesOf(all), event.TurnStarted); n != 2 {
		t.Fatalf("%d turns in the journal: %s", n, typesOf(all))
	}
	s2.Close(t)
	providertest.NoProcesses(t, d2)
	providertest.NoAnomalies(t, d2, "codex-acp")
}

// SIGKILL of codex-acp mid-turn (its permission open): the approval is
// cancelled, the turn ends interrupted (provider_exited), nothing is left.
func TestCodexACPKilledMidTurn(t *testing.T) {
	m := codextest.NewModel(t, codextest.Exec("call_1", "echo never"))
	d := providertest.Daemon(t, "", codexACP(t, "codex-acp", m))
	s := providertest.NewSession(t, d, client, "codex-acp", t.TempDir())
	s.Send(t, "run it")
	s.Next(t, event.ApprovalRequested)
	if err := syscall.Kill(s.Hold.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if done.Status != event.StatusInterrupted || done.Reason != event.ReasonProviderExited {
		t.Fatalf("turn.completed %+v; events %s", done, s.Types())
	}
	s.Next(t, event.ProviderExited)
	providertest.NoProcesses(t, d)
}

func typesOf(evs []event.Event) string {
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = e.Type
	}
	return strings.Join(s, ",")
}

// The session gone from CODEX_HOME: codex-acp answers the load
// not-found (-32002), the re-hold gets a fresh session and journals
// provider.thread_replaced; the next turn works.
func TestCodexACPSessionRemoved(t *testing.T) {
	m := codextest.NewModel(t)
	home := acptest.CodexHome(t, m.URL)
	d := providertest.Daemon(t, "", acptest.CodexACPTable("codex-acp", acptest.CodexACP(t), home, t.TempDir()))
	s := providertest.NewSession(t, d, client, "codex-acp", t.TempDir())
	s.Send(t, "hello")
	s.Next(t, event.TurnCompleted)
	old := s.Hold.ThreadID
	s.Close(t)
	if err := os.RemoveAll(filepath.Join(home, "sessions")); err != nil {
		t.Fatal(err)
	}
	s.AttachAndHold(t)
	rep := providertest.Decode[event.ThreadReplacedData](t, s.Next(t, event.ProviderThreadReplace))
	if rep.OldThreadID != old || rep.NewThreadID == old || rep.NewThreadID != s.Hold.ThreadID || !strings.Contains(rep.Cause, "-32002") {
		t.Fatalf("thread_replaced %+v, hold thread %s", rep, s.Hold.ThreadID)
	}
	s.Send(t, "again")
	if tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("turn on the fresh session: %+v", tc)
	}
	s.Close(t)
	providertest.NoProcesses(t, d)
	providertest.NoAnomalies(t, d, "codex-acp")
}
