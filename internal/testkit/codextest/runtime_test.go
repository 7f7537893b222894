package codextest_test

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// TestCodexSharedRuntime: the built-in codex profile's default,
// processes = "account": five sessions are threads of one codex
// app-server (one pid, one runtime id), a turn on each at once, each
// reply in its own journal only; closing one leaves the others' next
// turns working.
func TestCodexSharedRuntime(t *testing.T) {
	replies := []string{"alpha", "bravo", "charlie", "delta", "echo"}
	var scripted []codextest.Reply
	for _, r := range replies {
		scripted = append(scripted, codextest.Text(r+" ", "reply"))
	}
	m := codextest.NewModel(t, scripted...)
	d := providertest.Daemon(t, "", sharedProviderConfig(t, "codex", codextest.Home(t, m.URL, "")))
	ss := make([]*providertest.Session, len(replies))
	for i := range ss {
		ss[i] = providertest.NewSession(t, d, client, "codex", t.TempDir())
	}
	var rt string
	for i, s := range ss {
		var si api.SessionInfo
		if err := s.C.Call(providertest.Ctx(t), "agentSession.get", map[string]any{"sessionId": s.ID}, &si); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			rt = si.RuntimeID
		}
		if si.RuntimeID == "" || si.RuntimeID != rt || si.PID != ss[0].Hold.PID {
			t.Fatalf("session %d: runtime %q pid %d; session 0: %q pid %d", i, si.RuntimeID, si.PID, rt, ss[0].Hold.PID)
		}
	}
	// Figures, not asserted: hold-to-ready of the cold start (spawn,
	// initialize, thread/start) and of the warm ones (thread/start only).
	for _, line := range strings.Split(d.Log.String(), "\n") {
		if strings.Contains(line, `"msg":"provider started"`) {
			if i := strings.Index(line, `"ready_us":`); i >= 0 {
				t.Logf("hold-to-ready %s µs", strings.TrimRight(line[i+len(`"ready_us":`):], "}"))
			}
		}
	}
	turns := make([]string, len(ss))
	for i, s := range ss {
		turns[i] = s.Send(t, "say something")
	}
	var got []string
	for i, s := range ss {
		done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
		if done.Status != event.StatusCompleted {
			t.Fatalf("session %d: turn.completed %+v", i, done)
		}
		text, _ := s.Message(t, turns[i])
		word, ok := strings.CutSuffix(text, " reply")
		if !ok || !slices.Contains(replies, word) {
			t.Fatalf("session %d's reply %q is not one scripted reply (events %s)", i, text, s.Types())
		}
		got = append(got, word)
	}
	slices.Sort(got)
	if !slices.Equal(got, replies) {
		t.Fatalf("replies across the sessions %v, want each scripted reply once: one went to two journals", got)
	}
	ss[1].Close(t)
	last := ss[2].Send(t, "again")
	for {
		ev := ss[2].Next(t, event.TurnCompleted)
		if ev.TurnID == last {
			break
		}
	}
	providertest.NoAnomalies(t, d, "codex")
}

// TestCodexSharedApprovalWhileAnotherStreams: on one codex app-server, a
// command approval stays open on one session while another session's
// turn streams and completes; the approval then runs the command on the
// first. Each approval and reply only in its own journal.
func TestCodexSharedApprovalWhileAnotherStreams(t *testing.T) {
	dir := t.TempDir()
	marker := dir + "/ran"
	m := codextest.NewModel(t, codextest.Exec("call_1", "touch "+marker), codextest.Text("other ", "streams"), codextest.Text("command ", "done"))
	d := providertest.Daemon(t, "", sharedProviderConfig(t, "codex", codextest.Home(t, m.URL, "")))
	a := providertest.NewSession(t, d, client, "codex", dir)
	b := providertest.NewSession(t, d, client, "codex", t.TempDir())
	if a.Hold.PID != b.Hold.PID {
		t.Fatalf("two processes: %d and %d", a.Hold.PID, b.Hold.PID)
	}
	ta := a.Send(t, "run it")
	req := providertest.Decode[event.ApprovalRequestedData](t, a.Next(t, event.ApprovalRequested))
	tb := b.Send(t, "say something")
	if done := providertest.Decode[event.TurnCompletedData](t, b.Next(t, event.TurnCompleted)); done.Status != event.StatusCompleted {
		t.Fatalf("b's turn while a's approval is open: %+v", done)
	}
	if text, _ := b.Message(t, tb); text != "other streams" {
		t.Fatalf("b's reply %q", text)
	}
	for _, ev := range b.Events() {
		if ev.Type == event.ApprovalRequested {
			t.Fatalf("a's approval reached b: %s", ev.Data)
		}
	}
	a.Respond(t, req.RequestID, "approve")
	if done := providertest.Decode[event.TurnCompletedData](t, a.Next(t, event.TurnCompleted)); done.Status != event.StatusCompleted {
		t.Fatalf("a's turn: %+v", done)
	}
	if text, _ := a.Message(t, ta); text != "command done" {
		t.Fatalf("a's reply %q", text)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	providertest.NoAnomalies(t, d, "codex")
}

// TestCodexSharedRuntimeKilled: SIGKILL of the shared codex process with
// an approval open on each of two sessions: each session's approval is
// cancelled, its turn ends interrupted (provider_exited), provider.exited
// names the runtime, the lease is released, nothing of the tree is left,
// and the next hold starts a new runtime.
func TestCodexSharedRuntimeKilled(t *testing.T) {
	m := codextest.NewModel(t, codextest.Exec("call_1", "echo never"), codextest.Exec("call_2", "echo never"))
	d := providertest.Daemon(t, "", sharedProviderConfig(t, "codex", codextest.Home(t, m.URL, "")))
	ss := []*providertest.Session{
		providertest.NewSession(t, d, client, "codex", t.TempDir()),
		providertest.NewSession(t, d, client, "codex", t.TempDir()),
	}
	var rt string
	if err := ss[0].C.Call(providertest.Ctx(t), "agentSession.get", map[string]any{"sessionId": ss[0].ID}, &struct {
		RuntimeID *string `json:"runtimeId"`
	}{&rt}); err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		s.Send(t, "run it")
		s.Next(t, event.ApprovalRequested)
	}
	pid := ss[0].Hold.PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		res := providertest.Decode[event.ApprovalResolvedData](t, s.Next(t, event.ApprovalResolved))
		tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
		ex := providertest.Decode[event.ProviderExitedData](t, s.Next(t, event.ProviderExited))
		s.Next(t, event.LeaseReleased)
		if res.Decision != "cancel" || res.Reason != "provider_exited" || tc.Status != event.StatusInterrupted ||
			tc.Reason != event.ReasonProviderExited || ex.RuntimeID != rt || ex.Expected {
			t.Fatalf("session %d: approval.resolved %+v, turn.completed %+v, provider.exited %+v (runtime %s)", i, res, tc, ex, rt)
		}
	}
	providertest.NoProcesses(t, d)
	ss[0].AttachAndHold(t)
	if ss[0].Hold.PID == pid || ss[0].Hold.PID == 0 {
		t.Fatalf("re-hold after the runtime died: pid %d (the dead one %d)", ss[0].Hold.PID, pid)
	}
}
