package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/ctl"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/store"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// stubbornConfig: a provider that survives SIGTERM and stdin EOF, so a
// killed daemon leaves it behind and a shutdown takes the whole ladder.
func stubbornConfig(t *testing.T) string {
	return fmt.Sprintf("[ladder]\ngrace = \"200ms\"\nterm_timeout = \"1s\"\nkill_timeout = \"1s\"\n"+
		"[providers.stubborn]\ncommand = [%q, \"provider\", \"echo\", \"--ignore-sigterm\", \"--ignore-eof\"]\n",
		daemontest.Binary(t))
}

// doctorJSON runs `ctl doctor --json` and decodes the report.
func doctorJSON(t *testing.T, socket string, args ...string) (int, ctl.DoctorReport, string) {
	t.Helper()
	code, out, errOut := runCtl(t, socket, t.TempDir(), append([]string{"--json", "doctor"}, args...)...)
	var rep ctl.DoctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json printed %q (%v), stderr %s", out, err, errOut)
	}
	return code, rep, out
}

func problemsOf(rep ctl.DoctorReport, check string) []ctl.DoctorProblem {
	for _, c := range rep.Checks {
		if c.Name == check {
			return c.Problems
		}
	}
	return nil
}

// startTagged starts an echo provider carrying the daemon's state id for a
// session no live child owns (what a leaked descendant looks like).
func startTagged(t *testing.T, stateID string) *exec.Cmd {
	cmd := exec.Command(daemontest.Binary(t), "provider", "echo")
	cmd.Env = append(cmd.Environ(), "GORACE=atexit_sleep_ms=0", "SESSIOND_STATE_ID="+stateID,
		"SESSIOND_SESSION_ID=s_doctortest_orphan", "SESSIOND_FENCE=9")
	sysx.Tie(cmd, syscall.SIGKILL)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// TestE2EDoctorWithDaemon: clean with a live session (its child is owned);
// a tagged process no live session owns is a PROBLEM with a kill fix and
// exit 1.
func TestE2EDoctorWithDaemon(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	code, rep, out := doctorJSON(t, d.Socket)
	if code != 0 || !rep.Daemon || rep.StateID != d.StateID || rep.Problems != 0 {
		t.Fatalf("doctor on a healthy daemon: exit %d\n%s", code, out)
	}
	stray := startTagged(t, d.StateID)
	code, rep, out = doctorJSON(t, d.Socket)
	ps := problemsOf(rep, "tagged-processes")
	if code != 1 || len(ps) != 1 || !strings.HasPrefix(ps[0].Fix, fmt.Sprintf("kill %d", stray.Process.Pid)) {
		t.Fatalf("doctor with a stray tagged process %d: exit %d\n%s", stray.Process.Pid, code, out)
	}
	code, text, _ := runCtl(t, d.Socket, t.TempDir(), "doctor")
	if code != 1 || !strings.Contains(text, "PROBLEM  tagged-processes") || !strings.Contains(text, "ok       leases") {
		t.Fatalf("text report: exit %d\n%s", code, text)
	}
}

// TestE2EDoctorAfterKill: a SIGKILLed daemon leaves a stubborn child
// mid-turn; doctor (no daemon: it reads the store) finds the live lease,
// the open turn and the orphan, exits 1; `sessiond serve` reaps it all and
// doctor is clean again.
func TestE2EDoctorAfterKill(t *testing.T) {
	cfg := stubbornConfig(t)
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "stubborn", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, &h); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", map[string]any{"sessionId": s.SessionID, "text": "/orphan /sleep 60000"}, nil); err != nil {
		t.Fatal(err)
	}
	// The /orphan descendant (new session, ignores SIGTERM) outlives the
	// daemon; the root may die of SIGPIPE once the daemon is gone.
	orphan := 0
	for deadline := time.Now().Add(10 * time.Second); orphan == 0; {
		for _, p := range daemontest.TaggedProcesses(d.StateID) {
			// The descendant itself, not a short-lived process of its
			// start (seen under load: the check then found none alive).
			if cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); p != h.PID && strings.Contains(string(cl), "--orphan-child") {
				orphan = p
			}
		}
		if orphan == 0 && time.Now().After(deadline) {
			t.Fatalf("no /orphan descendant appeared:\n%s", d.Log.String())
		}
		time.Sleep(10 * time.Millisecond) // no signal for another process's start
	}
	d.Kill()
	code, rep, out := doctorJSON(t, d.Socket, "--state-dir", d.StateDir)
	if code != 1 || rep.Daemon || rep.StateID != d.StateID {
		t.Fatalf("doctor after kill: exit %d\n%s", code, out)
	}
	for _, check := range []string{"leases", "open-turns", "tagged-processes"} {
		ps := problemsOf(rep, check)
		if len(ps) == 0 || !strings.Contains(ps[0].What, s.SessionID) && check != "tagged-processes" {
			t.Errorf("check %s: problems %+v, want one naming %s", check, ps, s.SessionID)
		}
	}
	// Every tagged process still alive after doctor ran (the orphan at
	// least) is named with its kill line. The pid seen before the kill
	// may have been a short-lived one; the check is made on what is alive.
	ps := problemsOf(rep, "tagged-processes")
	alive := 0
	for _, p := range daemontest.TaggedProcesses(d.StateID) {
		if p == h.PID {
			continue
		}
		alive++
		if !strings.Contains(fmt.Sprint(ps), fmt.Sprintf("kill %d", p)) {
			t.Errorf("tagged-processes: %+v, want a kill of the orphan %d (first seen: %d)", ps, p, orphan)
		}
	}
	if alive == 0 || len(ps) == 0 {
		t.Errorf("tagged-processes: %+v and %d tagged processes alive besides the root, want the orphan (%d) named", ps, alive, orphan)
	}
	d2 := daemontest.Start(t, daemontest.Options{Config: cfg, StateDir: d.StateDir})
	code, rep, out = doctorJSON(t, d2.Socket)
	if code != 0 || rep.Problems != 0 {
		t.Fatalf("doctor after a restart reaped: exit %d\n%s", code, out)
	}
	d2.Stop()
	code, rep, out = doctorJSON(t, d2.Socket, "--state-dir", d.StateDir)
	if code != 0 || rep.Daemon || rep.Problems != 0 {
		t.Fatalf("doctor on a cleanly stopped state dir: exit %d\n%s", code, out)
	}
}

// TestE2EDoctorReportsJournalLoss: a journal that records lost events
// (journal.loss) is a problem for doctor, from the store with no daemon
// and from a running daemon alike.
func TestE2EDoctorReportsJournalLoss(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if code, rep, out := doctorJSON(t, d.Socket); code != 0 || len(problemsOf(rep, "journal-loss")) != 0 {
		t.Fatalf("doctor before any loss: exit %d\n%s", code, out)
	}
	d.Stop()
	// What the journal writes when a live session's rows could not be stored.
	st, err := store.Open(d.StateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(st.DB, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx10(t), s.SessionID, event.New(event.JournalLoss, "", event.JournalLossData{Count: 3, Cause: "key too large"})); err != nil {
		t.Fatal(err)
	}
	j.Close()
	st.Close()

	code, rep, out := doctorJSON(t, d.Socket, "--state-dir", d.StateDir)
	if ps := problemsOf(rep, "journal-loss"); code != 1 || len(ps) != 1 || !strings.Contains(ps[0].What, s.SessionID) {
		t.Fatalf("doctor on the store: exit %d\n%s", code, out)
	}
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	code, rep, out = doctorJSON(t, d2.Socket)
	if ps := problemsOf(rep, "journal-loss"); code != 1 || len(ps) != 1 || !strings.Contains(ps[0].What, "3 events") {
		t.Fatalf("doctor on the daemon: exit %d\n%s", code, out)
	}
}

// startTaggedRuntime starts an echo provider tagged as a shared runtime
// runtimeID of the daemon's state (no session's id), not a descendant of
// the daemon.
func startTaggedRuntime(t *testing.T, stateID, runtimeID string) *exec.Cmd {
	cmd := exec.Command(daemontest.Binary(t), "provider", "echo")
	cmd.Env = append(cmd.Environ(), "GORACE=atexit_sleep_ms=0", "SESSIOND_STATE_ID="+stateID, "SESSIOND_RUNTIME_ID="+runtimeID)
	sysx.Tie(cmd, syscall.SIGKILL)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// TestE2EDoctorSharedRuntime: a shared runtime's processes (tagged
// SESSIOND_RUNTIME_ID) are owned while a session runs on it, and while it
// waits out its release clock with none; a process tagged with a runtime
// the daemon does not run is a PROBLEM naming that runtime.
func TestE2EDoctorSharedRuntime(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "[providers.echo]\nprocesses = \"account\"\n"})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	var si api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: s.SessionID}, &si); err != nil {
		t.Fatal(err)
	}
	startTaggedRuntime(t, d.StateID, si.RuntimeID) // a detached process of the live runtime's
	if code, rep, out := doctorJSON(t, d.Socket); code != 0 || rep.Problems != 0 {
		t.Fatalf("doctor with a session on a shared runtime: exit %d\n%s", code, out)
	}
	var cr api.CloseResult
	if err := c.Call(ctx10(t), "agentSession.close", api.SessionParams{SessionID: s.SessionID}, &cr); err != nil {
		t.Fatal(err)
	}
	if code, rep, out := doctorJSON(t, d.Socket); code != 0 || rep.Problems != 0 {
		t.Fatalf("doctor with an idle shared runtime (its release clock runs): exit %d\n%s", code, out)
	}
	stray := startTaggedRuntime(t, d.StateID, "r_doctortest_stray")
	code, rep, out := doctorJSON(t, d.Socket)
	ps := problemsOf(rep, "tagged-processes")
	if code != 1 || len(ps) != 1 || !strings.Contains(ps[0].What, "runtime r_doctortest_stray") ||
		ps[0].Fix != fmt.Sprintf("kill %d", stray.Process.Pid) {
		t.Fatalf("doctor with a stray runtime-tagged process %d: exit %d\n%s", stray.Process.Pid, code, out)
	}
}
