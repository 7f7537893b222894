package e2e

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ECtlFollowAndHold: `ctl attach --follow --json` streams events as
// JSON lines until SIGINT (exit 0) and starts no child; `ctl hold
// --no-wait` starts one; `ctl release` of an unknown holder is not an error.
func TestE2ECtlFollowAndHold(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemontest.Binary(t), "ctl", "--socket", d.Socket, "--json", "attach", s.SessionID, "--follow")
	cmd.Env = append(cmd.Environ(), "GORACE=atexit_sleep_ms=0")
	sysx.Tie(cmd, syscall.SIGKILL)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	next := func() event.Event {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("ctl attach ended early: %v", lines.Err())
		}
		var ev event.Event
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("not a JSON event line %q: %v", lines.Text(), err)
		}
		return ev
	}
	if ev := next(); ev.Type != event.SessionCreated {
		t.Fatalf("first event %+v", ev)
	}
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("attach started a child: %v", pids)
	}
	code, out, errOut := runCtl(t, d.Socket, t.TempDir(), "hold", s.SessionID, "--no-wait", "--holder", "h1")
	if code != 0 || !strings.Contains(out, "live") {
		t.Fatalf("hold --no-wait: %d %s %s", code, out, errOut)
	}
	if ev := next(); ev.Type != event.LeaseAcquired {
		t.Fatalf("after hold: %+v", ev)
	}
	code, out, _ = runCtl(t, d.Socket, t.TempDir(), "release", s.SessionID, "--holder", "nobody")
	if code != 0 || !strings.Contains(out, "false") {
		t.Fatalf("release of an unknown holder: %d %s", code, out)
	}
	cmd.Process.Signal(syscall.SIGINT)
	for lines.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ctl attach --follow after SIGINT: %v", err)
	}
	d.Stop() // evicts the held session
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("tagged processes after stop: %v", pids)
	}
}
