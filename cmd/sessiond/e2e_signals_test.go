package main

import (
	"strings"
	"syscall"
	"testing"

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
