package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// waitSigtermIgnored returns once pid's SigIgn mask has SIGTERM.
func waitSigtermIgnored(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(stallGuard); time.Now().Before(deadline); {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
				mask, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if mask&(1<<(uint(syscall.SIGTERM)-1)) != 0 {
					return
				}
			}
		}
		time.Sleep(time.Millisecond) // polling kernel state; nothing to subscribe to
	}
	t.Fatalf("pid %d never ignored SIGTERM", pid)
}

// signalLines counts the log's "signalled" lines for session id, pid and sig.
func signalLines(log, id string, pid int, sig string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "msg=signalled") && strings.Contains(l, "session_id="+id+" ") &&
			strings.Contains(l, fmt.Sprintf("pid=%d ", pid)) && strings.Contains(l, "signal="+sig+" ") {
			n++
		}
	}
	return n
}

// Every signal the close ladder sends to a provider is logged once with
// session_id, pid and signal: an operator can find when a child was
// SIGTERMed and SIGKILLed.
func TestCloseLadderSignalsAreLogged(t *testing.T) {
	f := newFixture(t)
	logs := &syncBuf{}
	f.h.log = slog.New(slog.NewTextHandler(logs, nil))
	id := f.create("stubborn") // ignores SIGTERM and stdin EOF
	pid := f.hold(id, "h", "c1").PID
	if _, err := f.h.Close(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []string{"SIGTERM", "SIGKILL"} {
		if n := signalLines(logs.String(), id, pid, sig); n != 1 {
			t.Errorf("%d log lines for %s of pid %d, want 1:\n%s", n, sig, pid, logs.String())
		}
	}
}

// The startup reap of a previous daemon's child logs its signals too.
func TestStartupReapSignalsAreLogged(t *testing.T) {
	f := newFixture(t)
	logs := &syncBuf{}
	f.h.log = slog.New(slog.NewTextHandler(logs, nil))
	id := f.create("echo")
	c := f.spawnLeftover(id, 0) // ignores SIGTERM
	f.leaseTo(id, c)
	waitSigtermIgnored(t, c.Identity().PID) // else SIGTERM lands before echo ignores it
	if err := f.h.Startup(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	pid := c.Identity().PID
	for _, sig := range []string{"SIGTERM", "SIGKILL"} {
		if n := signalLines(logs.String(), id, pid, sig); n != 1 {
			t.Errorf("%d log lines for %s of pid %d, want 1:\n%s", n, sig, pid, logs.String())
		}
	}
}

// The exit of a provider is logged with its exit code as a number.
func TestProviderExitLogsCode(t *testing.T) {
	f := newFixture(t)
	logs := &syncBuf{}
	f.h.log = slog.New(slog.NewTextHandler(logs, nil))
	id := f.create("echo")
	f.hold(id, "h", "c1")
	if _, err := f.h.Send(context.Background(), api.SendParams{SessionID: id, Text: "/crash"}); err != nil {
		t.Fatal(err)
	}
	f.waitFor(id, 0, isType(event.LeaseReleased))
	for deadline := time.Now().Add(stallGuard); !strings.Contains(logs.String(), "msg=\"provider exited\""); {
		if time.Now().After(deadline) {
			t.Fatalf("no provider exited line:\n%s", logs.String())
		}
		time.Sleep(time.Millisecond) // the line is written by the exit watcher
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=\"provider exited\"") && !regexp.MustCompile(` code=(\d+|<nil>) `).MatchString(l) {
			t.Fatalf("exit code not logged as a number: %s", l)
		}
	}
}
