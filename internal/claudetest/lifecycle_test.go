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
	"github.com/sessiond/sessiond/internal/claudetest"
	"github.com/sessiond/sessiond/internal/daemontest"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
)

// cancel while the model stream is stalled: the CLI gets the interrupt
// control request and the turn ends interrupted with user_cancel.
func TestClaudeCancelStalled(t *testing.T) {
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	m := claudetest.NewModel(t, claudetest.Reply{Stall: stall})
	d := daemonWith(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := newSession(t, d, "claude", t.TempDir())
	s.send(t, "think hard")
	waitArrived(t, m)
	var cr struct {
		Cancelled bool `json:"cancelled"`
	}
	if err := s.c.Call(ctxT(t), "agentSession.cancel", map[string]string{"sessionId": s.id}, &cr); err != nil || !cr.Cancelled {
		t.Fatalf("cancel %+v %v", cr, err)
	}
	done := decode[event.TurnCompletedData](t, s.f.next(t, event.TurnCompleted))
	if done.Status != event.StatusInterrupted || done.Reason != event.ReasonUserCancel {
		t.Fatalf("turn.completed %+v", done)
	}
	// The session goes on: the next turn is answered.
	s.send(t, "again")
	if done := decode[event.TurnCompletedData](t, s.f.next(t, event.TurnCompleted)); done.Status != event.StatusCompleted {
		t.Fatalf("next turn %+v", done)
	}
}

func waitArrived(t *testing.T, m *claudetest.Model) {
	t.Helper()
	select {
	case <-m.Arrived():
	case <-ctxT(t).Done():
		t.Fatal("the model saw no request")
	}
}

// SIGKILL of the CLI mid-turn, its approval open: the approval is
// cancelled, then the turn ends interrupted (provider_exited), the lease
// is released, and nothing of the session's tree is left.
func TestClaudeKilledMidTurn(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", "touch never && echo no"))
	d := daemonWith(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := newSession(t, d, "claude", t.TempDir())
	s.send(t, "run it")
	req := decode[event.ApprovalRequestedData](t, s.f.next(t, event.ApprovalRequested))
	if err := syscall.Kill(s.hold.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := decode[event.ApprovalResolvedData](t, s.f.next(t, event.ApprovalResolved))
	if got.RequestID != req.RequestID || got.Decision != "cancel" || got.By != "daemon" || got.Reason != "provider_exited" {
		t.Fatalf("approval.resolved %+v", got)
	}
	if tc := decode[event.TurnCompletedData](t, s.f.next(t, event.TurnCompleted)); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonProviderExited {
		t.Fatalf("turn.completed %+v", tc)
	}
	if se := decode[event.SessionEndedData](t, s.f.next(t, event.SessionEnded)); se.Reason != "provider_exited" {
		t.Fatalf("session.ended %+v", se)
	}
	s.f.next(t, event.LeaseReleased)
	noProcesses(t, d)
}

// A daemon restart, then a re-hold: the CLI runs with --resume and the
// same session_id, and the model sees the earlier turn.
func TestClaudeResumeAfterRestart(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Text("noted"), claudetest.Text("apple"))
	cfg := providerConfig(t, "claude", claudetest.NewEnv(t, m.URL))
	d := daemonWith(t, "", cfg)
	s := newSession(t, d, "claude", t.TempDir())
	s.send(t, "remember the word pineapple-42")
	s.f.next(t, event.TurnCompleted)
	thread := threadOf(t, s)
	if thread == "" {
		t.Fatal("no thread id after the first turn")
	}
	d.Stop()

	d2 := daemonWith(t, d.StateDir, cfg)
	c, f := dial(t, d2)
	s2 := &session{d: d2, c: c, f: f, id: s.id}
	s2.attachAndHold(t)
	if s2.hold.ThreadID != thread {
		t.Fatalf("re-hold thread %s, want %s", s2.hold.ThreadID, thread)
	}
	started := decode[struct {
		Resumed bool `json:"resumed"`
	}](t, lastOf(t, readAll(t, s2), event.ProviderStarted))
	if !started.Resumed {
		t.Fatal("provider.started after the restart is not a resume")
	}
	s2.send(t, "which word?")
	s2.f.next(t, event.TurnCompleted)
	reqs := m.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Messages(), "pineapple-42") {
		t.Fatalf("the model's second request does not carry the first turn: %d requests", len(reqs))
	}
	if got := threadOf(t, s2); got != thread {
		t.Fatalf("thread after the resumed turn %s, want %s", got, thread)
	}
	noAnomalies(t, d2)
}

// The conversation deleted from CLAUDE_CONFIG_DIR: the re-hold's CLI says
// "No conversation found", a fresh CLI starts a fresh conversation, and
// provider.thread_replaced names both.
func TestClaudeConversationRemoved(t *testing.T) {
	m := claudetest.NewModel(t)
	env := claudetest.NewEnv(t, m.URL)
	d := daemonWith(t, "", providerConfig(t, "claude", env))
	s := newSession(t, d, "claude", t.TempDir())
	s.send(t, "hello")
	s.f.next(t, event.TurnCompleted)
	old := threadOf(t, s)
	s.close(t)
	files := conversations(t, env["CLAUDE_CONFIG_DIR"], old)
	if len(files) == 0 {
		t.Fatalf("no conversation %s under %s", old, env["CLAUDE_CONFIG_DIR"])
	}
	for _, p := range files {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	s.attachAndHold(t)
	s.send(t, "hello again")
	rep := decode[event.ThreadReplacedData](t, s.f.next(t, event.ProviderThreadReplace))
	s.f.next(t, event.TurnCompleted)
	if rep.OldThreadID != old || rep.NewThreadID == "" || rep.NewThreadID == old || !strings.Contains(rep.Cause, "No conversation found") {
		t.Fatalf("thread_replaced %+v (old %s)", rep, old)
	}
	if got := threadOf(t, s); got != rep.NewThreadID {
		t.Fatalf("thread %s, want %s", got, rep.NewThreadID)
	}
	s.close(t)
	noProcesses(t, d)
}

// Two accounts, pinned by CLAUDE_CONFIG_DIR: each session's conversation
// lands under its own provider's config dir, and the record pins it.
func TestClaudeTwoAccounts(t *testing.T) {
	m := claudetest.NewModel(t)
	envA, envB := claudetest.NewEnv(t, m.URL), claudetest.NewEnv(t, m.URL)
	d := daemonWith(t, "", providerConfig(t, "claude-a", envA), providerConfig(t, "claude-b", envB))
	sa := newSession(t, d, "claude-a", t.TempDir())
	sb := newSession(t, d, "claude-b", t.TempDir())
	for _, s := range []*session{sa, sb} {
		s.send(t, "hello")
		s.f.next(t, event.TurnCompleted)
	}
	ta, tb := threadOf(t, sa), threadOf(t, sb)
	if len(conversations(t, envA["CLAUDE_CONFIG_DIR"], ta)) == 0 || len(conversations(t, envB["CLAUDE_CONFIG_DIR"], tb)) == 0 ||
		len(conversations(t, envA["CLAUDE_CONFIG_DIR"], tb)) != 0 || len(conversations(t, envB["CLAUDE_CONFIG_DIR"], ta)) != 0 {
		t.Fatalf("conversations not under their own account: a %s, b %s", ta, tb)
	}
}

// A Bash call that starts a detached sleep ignoring SIGTERM: closing the
// session leaves no process (the tree covers the CLI's shells and what
// they started).
func TestClaudeDetachedChildGone(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", "setsid sh -c 'trap \"\" TERM; touch started; sleep 300' >/dev/null 2>&1 < /dev/null & echo spawned"), claudetest.Text("ok"))
	dir := t.TempDir()
	d := daemonWith(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := newSession(t, d, "claude", dir)
	s.send(t, "start it")
	req := decode[event.ApprovalRequestedData](t, s.f.next(t, event.ApprovalRequested))
	s.respond(t, req.RequestID, "approve")
	s.f.next(t, event.TurnCompleted)
	if _, err := os.Stat(filepath.Join(dir, "started")); err != nil {
		t.Fatalf("the detached child did not start: %v", err)
	}
	s.close(t)
	noProcesses(t, d)
}

// A CLI that exits at start fails the hold with provider_failed and its
// stderr tail; nothing is left running.
func TestClaudeExitAtStart(t *testing.T) {
	m := claudetest.NewModel(t)
	cfg := strings.Replace(providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)), `"--verbose", `, `"--no-such-flag", `, 1)
	d := daemonWith(t, "", cfg)
	c, _ := dial(t, d)
	var info api.SessionInfo
	if err := c.Call(ctxT(t), "agentSession.create", api.CreateParams{Provider: "claude", Cwd: t.TempDir()}, &info); err != nil {
		t.Fatal(err)
	}
	err := c.Call(ctxT(t), "agentSession.hold", api.HoldParams{SessionID: info.SessionID, HolderID: "e2e"}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "provider_failed" || !strings.Contains(fmt.Sprint(re.Data["stderrTail"]), "no-such-flag") {
		t.Fatalf("hold: %v", err)
	}
	noProcesses(t, d)
}

// gone: pid is absent, or a zombie nobody has reaped yet (a container's
// pid 1 may not reap the orphans it inherits).
func gone(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(st), ')')
	return i > 0 && strings.HasPrefix(string(st[i+1:]), " Z")
}

func threadOf(t *testing.T, s *session) string {
	t.Helper()
	var info api.SessionInfo
	if err := s.c.Call(ctxT(t), "agentSession.get", api.SessionParams{SessionID: s.id}, &info); err != nil {
		t.Fatal(err)
	}
	return info.ThreadID
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

func lastOf(t *testing.T, evs []event.Event, typ string) event.Event {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	t.Fatalf("no %s", typ)
	return event.Event{}
}

func readAll(t *testing.T, s *session) []event.Event {
	t.Helper()
	var r struct {
		Events []event.Event `json:"events"`
	}
	if err := s.c.Call(ctxT(t), "agentSession.read", map[string]any{"sessionId": s.id, "afterSeq": 0, "limit": 4096}, &r); err != nil {
		t.Fatal(err)
	}
	return r.Events
}

// The daemon SIGKILLed while the CLI runs: the next daemon stops the
// orphaned CLI (reap-orphans) before anything can resume the
// conversation, and the re-hold runs exactly one CLI on it.
func TestClaudeDaemonKilledThenResumed(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Text("noted"), claudetest.Text("apple"))
	cfg := providerConfig(t, "claude", claudetest.NewEnv(t, m.URL))
	d := daemonWith(t, "", cfg)
	s := newSession(t, d, "claude", t.TempDir())
	s.send(t, "remember the word pineapple-42")
	s.f.next(t, event.TurnCompleted)
	thread, old := threadOf(t, s), s.hold.PID
	d.Kill()
	d.Wait(waitLong)

	d2 := daemonWith(t, d.StateDir, cfg)
	if !gone(old) {
		t.Fatalf("the orphaned CLI (pid %d) survived the restart\n%s", old, d2.Log.String())
	}
	c, f := dial(t, d2)
	s2 := &session{d: d2, c: c, f: f, id: s.id}
	s2.attachAndHold(t)
	if s2.hold.ThreadID != thread || len(daemontest.TaggedProcesses(d2.StateID)) != 1 {
		t.Fatalf("re-hold thread %s (want %s), processes %v", s2.hold.ThreadID, thread, daemontest.TaggedProcesses(d2.StateID))
	}
	s2.send(t, "which word?")
	s2.f.next(t, event.TurnCompleted)
	if reqs := m.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Messages(), "pineapple-42") {
		t.Fatalf("the resumed conversation lost the first turn: %d requests", len(reqs))
	}
}
