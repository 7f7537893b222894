package e2e

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/ctl"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ECtlTop: `ctl top --once` prints one table of the live sessions
// with the provider child's pid, its RSS and CPU from /proc (gopsutil),
// its PSS (smaps_rollup),
// the turns the journal holds and events/s; a stored session is not in it.
func TestE2ECtlTop(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	var live, stored api.SessionInfo
	for _, s := range []*api.SessionInfo{&live, &stored} {
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir}, s); err != nil {
			t.Fatal(err)
		}
	}
	var at api.AttachResult
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: live.SessionID}, &at); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: live.SessionID, HolderID: "t"}, &h); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"one", "two"} {
		var sr api.SendResult
		if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: live.SessionID, Text: text}, &sr); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		waitEvent(t, rec.ch, event.TurnCompleted)
	}

	code, out, errOut := runCtl(t, d.Socket, dir, "top", "--once", "--interval", "100ms")
	if code != 0 {
		t.Fatalf("top --once: exit %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || lines[0]+"\n" != ctl.TopHeading ||
		!regexp.MustCompile(`^ID\s+PROVIDER\s+PID\s+PROCS\s+RSS\s+PSS\s+MEM\s+CPU%\s+TURNS\s+TURN\s+EVENTS/S\s+TITLE$`).MatchString(lines[1]) {
		t.Fatalf("top --once: want what is summed, a header and one live session:\n%s", out)
	}
	row := regexp.MustCompile(`^` + regexp.QuoteMeta(live.SessionID) + `\s+echo\s+` + strconv.Itoa(h.PID) +
		`\s+1\s+\d+(\.\d)?[KMG]\s+\d+(\.\d)?[KMG]\s+\d+(\.\d)?[KMG]\s+\d+\.\d\s+2\s+-\s+\d+\.\d\s+-$`)
	if !row.MatchString(lines[2]) {
		t.Fatalf("row %q: want id, echo, pid %d, 1 process, RSS, PSS, MEM, CPU, 2 turns, no turn running, events/s", lines[2], h.PID)
	}

	code, out, errOut = runCtl(t, d.Socket, dir, "--json", "top", "--once", "--interval", "100ms")
	var rows []struct {
		SessionID string `json:"sessionId"`
		PID       int    `json:"pid"`
		RSS       uint64 `json:"rssBytes"`
		PSS       uint64 `json:"pssBytes"`
		Turns     int    `json:"turns"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
		t.Fatalf("--json top --once: exit %d %q %s", code, out, errOut)
	}
	if r := rows[0]; r.SessionID != live.SessionID || r.PID != h.PID || r.RSS == 0 || r.PSS == 0 || r.PSS > r.RSS || r.Turns != 2 {
		t.Fatalf("row %+v: want %s pid %d, 0 < PSS <= RSS, 2 turns", r, live.SessionID, h.PID)
	}
}

// TestCtlTopIntervalBounds: an interval below 100ms or above an hour is a
// usage error (exit 2) naming the range, before any daemon is asked.
func TestCtlTopIntervalBounds(t *testing.T) {
	socket := t.TempDir() + "/none.sock" // never dialled: the check comes first
	for _, iv := range []string{"0s", "-1s", "1ms", "99ms", "1h0m1s", "48h"} {
		code, out, errOut := runCtl(t, socket, t.TempDir(), "top", "--interval", iv)
		if code != exitcode.Usage || out != "" || !strings.Contains(errOut, "out of range: want 100ms to 1h0m0s") ||
			!strings.Contains(errOut, "usage: sessiond ctl top") {
			t.Fatalf("--interval %s: exit %d, stdout %q, stderr:\n%s", iv, code, out, errOut)
		}
	}
	for _, iv := range []string{"100ms", "1h"} { // the bounds themselves are fine: no daemon is the error
		if code, _, errOut := runCtl(t, socket, t.TempDir(), "top", "--once", "--interval", iv); code != exitcode.NoDaemon {
			t.Fatalf("--interval %s: exit %d %s, want %d (no daemon)", iv, code, errOut, exitcode.NoDaemon)
		}
	}
}

// TestE2ECtlTopChurn: `ctl top` keeps refreshing while sessions start,
// close and are deleted, also between its list and its journal reads (a
// session gone meanwhile is left out of that frame, not an error), and
// ends with exit 0 on SIGINT. Four clients churn sessions for 100 frames.
func TestE2ECtlTopChurn(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	top := startCtl(t, d.Socket, "--json", "top", "--interval", "100ms")
	dir := t.TempDir()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		c := d.Client(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				var s api.SessionInfo
				if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir}, &s); err != nil {
					t.Error(err)
					return
				}
				for _, call := range []struct {
					method string
					params any
				}{
					{"agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}},
					{"agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "hi"}},
					{"agentSession.close", api.SessionParams{SessionID: s.SessionID}},
					{"agentSession.delete", api.SessionParams{SessionID: s.SessionID}},
				} {
					if err := c.Call(ctx10(t), call.method, call.params, nil); err != nil {
						t.Errorf("%s: %v", call.method, err)
						return
					}
				}
			}
		}()
	}
	for frames := 0; frames < 100; frames++ {
		select {
		case l := <-top.lines:
			var rows []ctl.TopRow
			if json.Unmarshal([]byte(l), &rows) != nil {
				close(done)
				wg.Wait()
				t.Fatalf("not a frame: %q\n%s", l, top.output())
			}
		case <-top.exited:
			close(done)
			wg.Wait()
			out := top.output()
			t.Fatalf("top exited %d under churn after %d frames:\n%s", top.code, frames, out[max(0, len(out)-1500):])
		case <-time.After(60 * time.Second):
			close(done)
			wg.Wait()
			t.Fatalf("top stopped printing frames")
		}
	}
	close(done)
	wg.Wait()
	top.cmd.Process.Signal(syscall.SIGINT)
	<-top.exited
	if top.code != 0 || strings.Contains(top.output(), "sessiond ctl:") {
		out := top.output()
		t.Fatalf("top under churn: exit %d\n%s", top.code, out[max(0, len(out)-1500):])
	}
}

// TestE2ECtlTopInterruptedMidFrame: Ctrl-C while top waits for a frame's
// calls ends top with exit 0 and no error, as between frames (it printed
// "agentSession.list: context canceled" and exited 1). The daemon is
// stopped so that top, once its next tick has come, stays inside the
// frame's first call; ten intervals without a frame is that moment (on a
// machine too loaded to tick in a second the test passes without proving
// anything, it cannot fail falsely).
func TestE2ECtlTopInterruptedMidFrame(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	top := startCtl(t, d.Socket, "--json", "top", "--interval", "100ms")
	top.waitLine(t, "[")
	pid := d.Cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	for quiet := time.NewTimer(time.Second); ; {
		select {
		case <-top.lines:
			quiet.Reset(time.Second) // a frame read before the stop
			continue
		case <-quiet.C:
		}
		break
	}
	top.cmd.Process.Signal(syscall.SIGINT)
	<-top.exited
	if top.code != 0 || strings.Contains(top.output(), "sessiond ctl:") {
		t.Fatalf("top interrupted mid-frame: exit %d, want 0 and no error:\n%s", top.code, top.output())
	}
}
