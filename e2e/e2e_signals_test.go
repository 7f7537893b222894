package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest/daemoncore"
)

// TestE2ESignalHangup: SIGHUP (a terminal's hangup) shuts the daemon down
// like SIGTERM: the session's /orphan descendant (it ignores SIGTERM) is
// stopped by the ladder, nothing is left, exit 0, the signal logged.
// SIGUSR1 and SIGUSR2 before it are logged and ignored: the daemon keeps
// serving. (Before: SIGHUP's default action killed the daemon, exit 129,
// nothing logged, the descendant kept running.)
func TestE2ESignalHangup(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "[ladder]\ngrace = \"100ms\"\nterm_timeout = \"300ms\"\nkill_timeout = \"1s\"\n"})
	for i, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2} {
		d.Cmd.Process.Signal(sig)
		waitLogN(t, d, `"msg":"signal ignored`, i+1)
		if !strings.Contains(d.Log.String(), `"signal":"`+sig.String()+`"`) {
			t.Fatalf("the ignored %v is not named:\n%s", sig, d.Log.String())
		}
		d.Status(t) // still serving
	}
	shutdownEvictsOn(t, d, "/orphan", syscall.SIGHUP)
	if !strings.Contains(d.Log.String(), `"msg":"signal received, shutting down","signal":"hangup"`) {
		t.Fatalf("the hangup is not logged:\n%s", d.Log.String())
	}
}

// TestE2ESignalDuringStart: SIGTERM while a hold is starting a provider
// slow to answer initialize (start_timeout = 1h) cancels the start: the
// hold fails, the child is torn down, the daemon exits 0 at once.
// (Before: the daemon waited out the handshake, start_timeout at most.)
func TestE2ESignalDuringStart(t *testing.T) {
	cfg := fmt.Sprintf("start_timeout = \"1h\"\n[providers.slow]\ncommand = [%q, \"provider\", \"echo\", \"--slow-start\", \"600000\"]\n",
		daemontest.Binary(t))
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "slow", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		held <- c.Call(context.Background(), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil)
	}()
	var tagged []int
	for deadline := time.Now().Add(20 * time.Second); len(tagged) == 0; tagged = daemontest.TaggedProcesses(d.StateID) {
		if time.Now().After(deadline) {
			t.Fatalf("no provider child started:\n%s", d.Log.String())
		}
		time.Sleep(10 * time.Millisecond) // polling /proc for the child
	}
	d.Cmd.Process.Signal(syscall.SIGTERM)
	if code := d.Wait(20 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM during a start, want 0 within 20 s:\n%s", code, d.Log.String())
	}
	if err := <-held; err == nil {
		t.Fatal("the hold succeeded during the shutdown")
	}
	for _, pid := range tagged {
		if daemontest.Running(pid) {
			t.Fatalf("the starting child %d outlived the daemon:\n%s", pid, d.Log.String())
		}
	}
}

// TestE2EHangupWithBrokenStderr: `sessiond serve 2>&1 | tee log` in a
// terminal that closes: the reader of the daemon's stderr is gone when
// SIGHUP comes. The daemon still shuts down whole and exits 0 (its log
// writes fail with EPIPE) rather than being killed by SIGPIPE at its
// first log line.
func TestE2EHangupWithBrokenStderr(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	s := daemoncore.Serve{Socket: filepath.Join(sockDir, "s.sock"), StateDir: filepath.Join(dir, "state"), Config: cfg,
		Env: []string{"GORACE=atexit_sleep_ms=0"}}
	cmd := s.Command(daemontest.Binary(t))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"msg":"listening"`) {
			break
		}
	}
	r.Close() // the log's reader is gone
	cmd.Process.Signal(syscall.SIGHUP)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if code := daemoncore.ExitCode(err); code != 0 {
			t.Fatalf("exit %d (%v) after SIGHUP with its stderr's reader gone, want 0", code, err)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the daemon did not exit within 60 s of SIGHUP")
	}
	if _, err := os.Stat(s.Socket); err == nil {
		t.Fatal("the socket is left: the daemon did not shut down whole")
	}
}
