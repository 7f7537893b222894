package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EShutdownDoesNotWaitBehindBlockedSend: a send blocked writing to
// a provider that stopped reading (SIGSTOPped, its stdin pipe full) does
// not hold up SIGTERM: the daemon cancels writes to its children before it
// waits for in-flight calls, so the send fails at once (session_not_live,
// or the connection closing under it), the daemon exits 0, and the turn
// is journaled interrupted, not failed by the provider request timeout.
func TestE2EShutdownDoesNotWaitBehindBlockedSend(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "e2e"}, &h); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(h.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(h.PID, syscall.SIGKILL) })
	sent := make(chan error, 1)
	go func() {
		ctx := ctx10(t)
		sent <- c.Call(ctx, "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: strings.Repeat("x", 900_000)}, nil)
	}()
	waitStdinFull(t, h.PID)
	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := <-sent
	var re *rpc.Error
	if err == nil || errors.As(err, &re) && re.Reason != "session_not_live" {
		t.Fatalf("blocked send during shutdown: %v (want session_not_live or the connection closed)", err)
	}
	if code := d.Wait(60 * time.Second); code != 0 {
		t.Fatalf("daemon exit %d\n%s", code, d.Log.String())
	}
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	for _, ev := range readJournal(t, d2.Client(t), s.SessionID) {
		var dd struct{ Status, Reason string }
		json.Unmarshal(ev.Data, &dd)
		if ev.Type == event.TurnCompleted && dd.Status != event.StatusInterrupted {
			t.Fatalf("the blocked turn ended %s (%s), want interrupted: %s", dd.Status, dd.Reason, ev.Data)
		}
	}
}

// waitStdinFull waits until the child's stdin pipe holds its whole
// capacity: the daemon's write to it is blocked.
func waitStdinFull(t *testing.T, pid int) {
	t.Helper()
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/0", pid), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	deadline := time.Now().Add(10 * time.Second)
	for {
		queued, size, qerr := sysx.PipeFill(fd)
		if qerr != nil {
			t.Fatalf("inspect the provider's stdin: %v", qerr)
		}
		if queued >= size {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stdin pipe holds %d of %d bytes: the send never blocked", queued, size)
		}
		time.Sleep(time.Millisecond) // polling kernel state; nothing to subscribe to
	}
}
