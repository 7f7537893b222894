package claudetest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// cancel while the model stream is stalled: the CLI gets the interrupt
// control request and the turn ends interrupted with user_cancel.
func TestClaudeCancelStalled(t *testing.T) {
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	m := claudetest.NewModel(t, claudetest.Reply{Stall: stall})
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	s.Send(t, "think hard")
	providertest.WaitArrived(t, m.Arrived())
	s.Cancel(t)
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if done.Status != event.StatusInterrupted || done.Reason != event.ReasonUserCancel {
		t.Fatalf("turn.completed %+v", done)
	}
	// The session goes on: the next turn is answered.
	s.Send(t, "again")
	if done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); done.Status != event.StatusCompleted {
		t.Fatalf("next turn %+v", done)
	}
}

// SIGKILL of the CLI mid-turn, its approval open: the approval is
// cancelled, then the turn ends interrupted (provider_exited), the lease
// is released, and nothing of the session's tree is left.
func TestClaudeKilledMidTurn(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", "touch never && echo no"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	s.Send(t, "run it")
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	if err := syscall.Kill(s.Hold.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := providertest.Decode[event.ApprovalResolvedData](t, s.Next(t, event.ApprovalResolved))
	if got.RequestID != req.RequestID || got.Decision != "cancel" || got.By != "daemon" || got.Reason != "provider_exited" {
		t.Fatalf("approval.resolved %+v", got)
	}
	if tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonProviderExited {
		t.Fatalf("turn.completed %+v", tc)
	}
	if se := providertest.Decode[event.SessionEndedData](t, s.Next(t, event.SessionEnded)); se.Reason != "provider_exited" {
		t.Fatalf("session.ended %+v", se)
	}
	s.Next(t, event.LeaseReleased)
	providertest.NoProcesses(t, d)
}

// A daemon restart, then a re-hold: the CLI runs with --resume and the
// same session_id, and the model sees the earlier turn.
func TestClaudeResumeAfterRestart(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Text("noted"), claudetest.Text("apple"))
	cfg := providerConfig(t, "claude", claudetest.NewEnv(t, m.URL))
	d := providertest.Daemon(t, "", cfg)
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	s.Send(t, "remember the word pineapple-42")
	s.Next(t, event.TurnCompleted)
	thread := s.ThreadID(t)
	if thread == "" {
		t.Fatal("no thread id after the first turn")
	}
	d.Stop()

	d2 := providertest.Daemon(t, d.StateDir, cfg)
	s2 := providertest.ReopenResumed(t, d2, client, s.ID, thread)
	s2.Send(t, "which word?")
	s2.Next(t, event.TurnCompleted)
	reqs := m.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Messages(), "pineapple-42") {
		t.Fatalf("the model's second request does not carry the first turn: %d requests", len(reqs))
	}
	if got := s2.ThreadID(t); got != thread {
		t.Fatalf("thread after the resumed turn %s, want %s", got, thread)
	}
	providertest.NoAnomalies(t, d2, "claude")
}

// The conversation deleted from CLAUDE_CONFIG_DIR: the re-hold's CLI says
// "No conversation found", a fresh CLI starts a fresh conversation under
// a newly minted id, and provider.thread_replaced names the old and the
// new one at the hold (before provider.started, whether or not a turn
// follows); the hold returns the new one, and the first turn's init names
// it too (no second replacement).
func TestClaudeConversationRemoved(t *testing.T) {
	m := claudetest.NewModel(t)
	env := claudetest.NewEnv(t, m.URL)
	d := providertest.Daemon(t, "", providerConfig(t, "claude", env))
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	s.Send(t, "hello")
	s.Next(t, event.TurnCompleted)
	old := s.ThreadID(t)
	s.Close(t)
	files := conversations(t, env["CLAUDE_CONFIG_DIR"], old)
	if len(files) == 0 {
		t.Fatalf("no conversation %s under %s", old, env["CLAUDE_CONFIG_DIR"])
	}
	for _, p := range files {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	s.AttachAndHold(t)
	rep := providertest.Decode[event.ThreadReplacedData](t, s.Next(t, event.ProviderThreadReplace))
	if rep.OldThreadID != old || rep.NewThreadID == "" || rep.NewThreadID == old || rep.NewThreadID != s.Hold.ThreadID ||
		!strings.Contains(rep.Cause, "No conversation found") {
		t.Fatalf("thread_replaced %+v (old %s, hold %s)", rep, old, s.Hold.ThreadID)
	}
	if ps := s.Next(t, event.ProviderStarted); !strings.Contains(string(ps.Data), `"resumed":false`) {
		t.Fatalf("provider.started %s", ps.Data)
	}
	s.Send(t, "hello again")
	s.Next(t, event.TurnCompleted)
	if got := s.ThreadID(t); got != rep.NewThreadID {
		t.Fatalf("thread after the fresh turn %q, want %s (old %s)", got, rep.NewThreadID, old)
	}
	if n := countOf(s.Events(), event.ProviderThreadReplace); n != 1 {
		t.Fatalf("%d provider.thread_replaced, want 1: %s", n, s.Types())
	}
	s.Close(t)
	providertest.NoProcesses(t, d)
}

// Two accounts, pinned by CLAUDE_CONFIG_DIR: each session's conversation
// lands under its own provider's config dir, and the record pins it.
func TestClaudeTwoAccounts(t *testing.T) {
	m := claudetest.NewModel(t)
	envA, envB := claudetest.NewEnv(t, m.URL), claudetest.NewEnv(t, m.URL)
	d := providertest.Daemon(t, "", providerConfig(t, "claude-a", envA), providerConfig(t, "claude-b", envB))
	sa := providertest.NewSession(t, d, client, "claude-a", t.TempDir())
	sb := providertest.NewSession(t, d, client, "claude-b", t.TempDir())
	for _, s := range []*providertest.Session{sa, sb} {
		s.Send(t, "hello")
		s.Next(t, event.TurnCompleted)
	}
	ta, tb := sa.ThreadID(t), sb.ThreadID(t)
	if len(conversations(t, envA["CLAUDE_CONFIG_DIR"], ta)) == 0 || len(conversations(t, envB["CLAUDE_CONFIG_DIR"], tb)) == 0 ||
		len(conversations(t, envA["CLAUDE_CONFIG_DIR"], tb)) != 0 || len(conversations(t, envB["CLAUDE_CONFIG_DIR"], ta)) != 0 {
		t.Fatalf("conversations not under their own account: a %s, b %s", ta, tb)
	}
}

// A Bash call that starts a detached sleep ignoring SIGTERM: closing the
// session leaves no process (the tree covers the CLI's shells and what
// they started). The call returns once the child has started (it waits
// for the child's file), so the turn cannot end before it runs.
func TestClaudeDetachedChildGone(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", "setsid sh -c 'trap \"\" TERM; touch started; sleep 300' >/dev/null 2>&1 < /dev/null & until [ -e started ]; do sleep 0.05; done; echo spawned"), claudetest.Text("ok"))
	dir := t.TempDir()
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", dir)
	s.Send(t, "start it")
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	s.Respond(t, req.RequestID, "approve")
	s.Next(t, event.TurnCompleted)
	if _, err := os.Stat(filepath.Join(dir, "started")); err != nil {
		t.Fatalf("the detached child did not start: %v", err)
	}
	s.Close(t)
	providertest.NoProcesses(t, d)
}

// A CLI that exits at start fails the hold with provider_failed and its
// stderr tail; nothing is left running.
func TestClaudeExitAtStart(t *testing.T) {
	m := claudetest.NewModel(t)
	cfg := strings.Replace(providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)), `"--verbose", `, `"--no-such-flag", `, 1)
	d := providertest.Daemon(t, "", cfg)
	c := providertest.Dial(t, d, client).C
	var info api.SessionInfo
	if err := c.Call(providertest.Ctx(t), "agentSession.create", api.CreateParams{Provider: "claude", Cwd: t.TempDir()}, &info); err != nil {
		t.Fatal(err)
	}
	err := c.Call(providertest.Ctx(t), "agentSession.hold", api.HoldParams{SessionID: info.SessionID, HolderID: "e2e"}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "provider_failed" || !strings.Contains(fmt.Sprint(re.Data["stderrTail"]), "no-such-flag") {
		t.Fatalf("hold: %v", err)
	}
	providertest.NoProcesses(t, d)
}

// conversations are the files of conversation id under a config dir.
func conversations(t *testing.T, dir, id string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && e.Name() == id+".jsonl" {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// The daemon SIGKILLed while the CLI runs: the next daemon stops the
// orphaned CLI (reap-orphans) before anything can resume the
// conversation, and the re-hold runs exactly one CLI on it.
func TestClaudeDaemonKilledThenResumed(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Text("noted"), claudetest.Text("apple"))
	cfg := providerConfig(t, "claude", claudetest.NewEnv(t, m.URL))
	d := providertest.Daemon(t, "", cfg)
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	s.Send(t, "remember the word pineapple-42")
	s.Next(t, event.TurnCompleted)
	thread, old := s.ThreadID(t), s.Hold.PID
	d.Kill()
	d.Wait(providertest.WaitLong)

	d2 := providertest.Daemon(t, d.StateDir, cfg)
	if providertest.Alive(old) {
		t.Fatalf("the orphaned CLI (pid %d) survived the restart\n%s", old, d2.Log.String())
	}
	s2 := providertest.Reopen(t, d2, client, s.ID)
	if s2.Hold.ThreadID != thread || len(daemontest.TaggedProcesses(d2.StateID)) != 1 {
		t.Fatalf("re-hold thread %s (want %s), processes %v", s2.Hold.ThreadID, thread, daemontest.TaggedProcesses(d2.StateID))
	}
	s2.Send(t, "which word?")
	s2.Next(t, event.TurnCompleted)
	if reqs := m.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Messages(), "pineapple-42") {
		t.Fatalf("the resumed conversation lost the first turn: %d requests", len(reqs))
	}
}
