package codextest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// sleeper is a command that writes its pid into pidFile, then becomes
// `sleep 300` (same pid).
func sleeper(pidFile string) string {
	return "echo $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + " && exec sleep 300"
}

// runSleeper starts a turn on s whose approved command sleeps, and returns
// the command's pid once it runs.
func runSleeper(t *testing.T, s *providertest.Session, pidFile string) int {
	t.Helper()
	s.Send(t, "run it")
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	s.Respond(t, req.RequestID, "approve")
	providertest.WaitFile(t, pidFile)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 1 {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return pid
}

// statFields are a process's ppid, pgid and sid from /proc/PID/stat.
func statFields(t *testing.T, pid int) (ppid, pgid, sid int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	fmt.Sscan(f[1], &ppid)
	fmt.Sscan(f[2], &pgid)
	fmt.Sscan(f[3], &sid)
	return ppid, pgid, sid
}

// codex 0.169 marks every command it runs with the thread it runs for:
// CODEX_THREAD_ID (and CODEX_SESSION_ID) is the thread's id in the
// command's environment, and codex itself does not carry it. So
// ThreadCommands finds one thread's commands and not another's, even with
// two threads' commands running at once. The command is also the leader
// of a process group and session of its own (setsid), not in codex's.
func TestCodexThreadCommands(t *testing.T) {
	dir := t.TempDir()
	pidA, pidB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	mA := codextest.NewModel(t, codextest.Exec("call_a", sleeper(pidA)))
	mB := codextest.NewModel(t, codextest.Exec("call_b", sleeper(pidB)))
	d := providertest.Daemon(t, "",
		providerConfig(t, "codex-a", codextest.Home(t, mA.URL, "")),
		providerConfig(t, "codex-b", codextest.Home(t, mB.URL, "")))
	a := providertest.NewSession(t, d, client, "codex-a", t.TempDir())
	b := providertest.NewSession(t, d, client, "codex-b", t.TempDir())
	cmdA, cmdB := runSleeper(t, a, pidA), runSleeper(t, b, pidB)
	threadA, threadB := a.ThreadID(t), b.ThreadID(t)
	scopeA, scopeB := scopeOf(t, a), scopeOf(t, b)

	gotA, err := codextest.ThreadCommands(scopeA, threadA)
	if err != nil {
		t.Fatal(err)
	}
	gotB, err := codextest.ThreadCommands(scopeB, threadB)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gotA, []int{cmdA}) || !slices.Equal(gotB, []int{cmdB}) {
		t.Fatalf("thread %s: %v (want [%d]); thread %s: %v (want [%d])", threadA, gotA, cmdA, threadB, gotB, cmdB)
	}
	native := childOf(t, a.Hold.PID)
	if ppid, _, _ := statFields(t, cmdA); ppid != native {
		t.Fatalf("command %d's parent is %d, want codex %d", cmdA, ppid, native)
	}
	_, pgid, sid := statFields(t, cmdA)
	_, codexPgid, codexSid := statFields(t, native)
	if pgid != cmdA || sid != cmdA || codexPgid == pgid || codexSid == sid {
		t.Fatalf("command %d: pgid %d sid %d; codex %d: pgid %d sid %d", cmdA, pgid, sid, native, codexPgid, codexSid)
	}

	// Interrupting a thread's turn does not reliably stop its command:
	// the turn ends interrupted and the command, in most runs, still runs,
	// still marked (codex ended it itself in 1 run of many: CI). While it
	// runs the mark finds it; killing what carries the mark stops it; the
	// other thread's command goes on.
	a.Cancel(t)
	if tc := providertest.Decode[event.TurnCompletedData](t, a.Next(t, event.TurnCompleted)); tc.Status != event.StatusInterrupted {
		t.Fatalf("turn.completed %+v", tc)
	}
	got, err := codextest.ThreadCommands(scopeA, threadA)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case slices.Equal(got, []int{cmdA}):
		if err := syscall.Kill(cmdA, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	case len(got) == 0:
		// Not found: codex is ending it (a dying process's environ is
		// no longer readable), so it must be gone soon.
		t.Logf("codex ends command %d with the interrupt itself", cmdA)
	default:
		t.Fatalf("after the interrupt, thread %s's commands: %v (want [%d])", threadA, got, cmdA)
	}
	codextest.WaitGone(t, cmdA, "the closed thread's command")
	if !providertest.Alive(cmdB) {
		t.Fatalf("thread %s's command %d stopped with the other thread's", threadB, cmdB)
	}
}

// scopeOf is the env tags of s's provider tree: its runtime's when it
// runs on a shared one, else its own.
func scopeOf(t *testing.T, s *providertest.Session) proc.Tags {
	t.Helper()
	var info api.SessionInfo
	if err := s.C.Call(providertest.Ctx(t), "agentSession.get", api.SessionParams{SessionID: s.ID}, &info); err != nil {
		t.Fatal(err)
	}
	if info.RuntimeID != "" {
		return proc.Tags{RuntimeID: info.RuntimeID, StateID: s.D.StateID}
	}
	return proc.Tags{SessionID: s.ID, StateID: s.D.StateID}
}

// A command codex runs inside its sandbox (no escalation asked, no
// approval) is marked the same way, and so is the sandbox around it:
// bwrap and codex-linux-sandbox carry CODEX_THREAD_ID too, so the mark
// finds the whole chain from codex's child down to the command. The turn
// interrupted, SIGKILL of what carries the mark ends the chain whatever the
// interrupt did (measured: it stopped the chain in 13 of 17 runs and left
// all three running in 4, once for over 60 s).
func TestCodexThreadCommandsSandboxed(t *testing.T) {
	m := codextest.NewModel(t, codextest.Reply{Exec: &codextest.ExecCall{CallID: "call_s", Cmd: "sleep 300", Sandboxed: true}})
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	thread := s.ThreadID(t)
	scope := scopeOf(t, s)
	native := childOf(t, s.Hold.PID)
	s.Send(t, "run it")
	// There is no signal for a process codex starts in its sandbox (a
	// read-only one: the command cannot write a file), so this polls.
	var marked []int
	cmd := 0
	for deadline := time.Now().Add(providertest.WaitLong); cmd == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no marked sleep 300 for thread %s (marked: %v); events %s", thread, marked, s.Types())
		}
		time.Sleep(20 * time.Millisecond)
		var err error
		if marked, err = codextest.ThreadCommands(scope, thread); err != nil {
			t.Fatal(err)
		}
		for _, pid := range marked {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); string(b) == "sleep\x00300\x00" {
				cmd = pid
			}
		}
	}
	// Every process from codex's child down to the command is marked.
	chain := 0
	for p := cmd; p != native; chain++ {
		if !slices.Contains(marked, p) {
			t.Fatalf("process %d between codex %d and the command %d is not marked (marked: %v)", p, native, cmd, marked)
		}
		p, _, _ = statFields(t, p)
		if p <= 1 {
			t.Fatalf("command %d is not below codex %d", cmd, native)
		}
	}
	if slices.Contains(marked, native) || slices.Contains(marked, s.Hold.PID) || chain < 2 {
		t.Fatalf("marked %v: codex %d/%d must not be, and the sandbox (%d processes) must", marked, s.Hold.PID, native, chain)
	}
	t.Logf("thread %s: %d marked processes from codex's child to the command: %v", thread, chain, marked)
	s.Cancel(t)
	if tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); tc.Status != event.StatusInterrupted {
		t.Fatalf("turn.completed %+v", tc)
	}
	left, err := codextest.ThreadCommands(scope, thread)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range left {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			t.Fatal(err)
		}
	}
	for _, pid := range marked {
		codextest.WaitGone(t, pid, "a marked process")
	}
}
