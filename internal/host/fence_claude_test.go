package host

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider/claude"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// The fence rule with the real Claude Code CLI: while the exit of a
// session's CLI is unproven, the close fails exit_unproven and a hold keeps
// that CLI — a second one never runs on the conversation; once its exit
// is proven, the next hold resumes the conversation with exactly one CLI.
func TestClaudeUnprovenThreadNeverTwoProcesses(t *testing.T) {
	m := claudetest.NewModel(t)
	f := newFixture(t)
	f.h.o.Providers["claude"] = Provider{Name: "claude", Command: append([]string{claudetest.Binary(t)}, claudetest.Args...),
		Env: claudetest.NewEnv(t, m.URL), New: claude.New, ResumeArgs: claude.ResumeArgs}
	ctx := context.Background()
	id := f.create("claude")
	first := f.hold(id, "h", "c1")
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	f.waitFor(id, 0, isType(event.TurnCompleted))
	si, _ := f.h.Get(ctx, id)
	thread := si.ThreadID
	if thread == "" {
		t.Fatal("no thread after the first turn")
	}

	real := f.h.stopChild
	f.h.stopChild = func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict {
		return proc.Verdict{Root: proc.Unverifiable, Tree: proc.Unverifiable}
	}
	_, closeErr := f.h.Close(ctx, id)
	again := f.hold(id, "h2", "c2")
	if left, _ := proc.ScanTagged(f.st.StateID); len(left) != 1 || again.PID != first.PID {
		t.Fatalf("a hold while the CLI's exit is unproven: pid %d (first %d); processes of the session %v, want the one CLI",
			again.PID, first.PID, left)
	}
	wantKind(t, closeErr, api.KindExitUnproven)

	e := f.h.lookup(id)
	e.mu.Lock()
	f.h.stopChild = real
	e.mu.Unlock()
	if _, err := f.h.Close(ctx, id); err != nil {
		t.Fatalf("close once the exit can be proven: %v", err)
	}
	if err := unix.Kill(first.PID, 0); !errors.Is(err, unix.ESRCH) {
		t.Fatalf("the first CLI (pid %d) is still there: %v", first.PID, err)
	}
	next := f.hold(id, "h3", "c3")
	if next.PID == first.PID || next.ThreadID != thread {
		t.Fatalf("re-hold pid %d thread %s, want a new CLI on %s", next.PID, next.ThreadID, thread)
	}
	if left, _ := proc.ScanTagged(f.st.StateID); len(left) != 1 {
		t.Fatalf("%d processes of the session after the resume, want 1: %v", len(left), left)
	}
}
