package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/daemontest"
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
