package e2e

import (
	"bufio"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// ctlProc is a `sessiond ctl` process whose output lines are watched.
type ctlProc struct {
	args   []string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder // stdout and stderr, in arrival order
	lines  chan string
	exited chan struct{}
	code   int
}

// startCtl starts `sessiond ctl --socket S ARGS`; it is killed when the
// test ends.
func startCtl(t *testing.T, socket string, args ...string) *ctlProc {
	t.Helper()
	p := &ctlProc{args: args, lines: make(chan string, 1024), exited: make(chan struct{})}
	p.cmd = exec.Command(daemontest.Binary(t), append([]string{"ctl", "--socket", socket}, args...)...)
	p.cmd.Dir = t.TempDir()
	p.cmd.Env = ctlEnviron(t)
	sysx.Tie(p.cmd, syscall.SIGKILL)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		err := p.cmd.Wait()
		pw.Close()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// waitLine waits for an output line holding s.
func (p *ctlProc) waitLine(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, s) {
				return
			}
		case <-p.exited:
			t.Fatalf("ctl %v exited %d before printing %q:\n%s", p.args, p.code, s, p.output())
		case <-timeout:
			t.Fatalf("ctl %v printed no %q:\n%s", p.args, s, p.output())
		}
	}
}

func (p *ctlProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// TestE2ECtlStoppedDaemon: against a daemon stopped with SIGSTOP (the
// kernel still completes connects from the socket's backlog), every ctl
// command ends with a message naming the stall and the daemon's pid, exit
// 1 (doctor: 3, could not check), whether it connects after the stop
// (its handshake goes unanswered) or was already waiting: attach
// --follow, hold, send streaming a turn, top.
func TestE2ECtlStoppedDaemon(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var live, held, sent api.SessionInfo
	for _, s := range []*api.SessionInfo{&live, &held, &sent} {
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: sent.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: live.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}

	follow := startCtl(t, d.Socket, "attach", live.SessionID, "--follow")
	hold := startCtl(t, d.Socket, "hold", held.SessionID)
	send := startCtl(t, d.Socket, "send", sent.SessionID, "/sleep 600000")
	top := startCtl(t, d.Socket, "top", "--interval", "100ms")
	hold.waitLine(t, "Ctrl-C releases")
	top.waitLine(t, "EVENTS/S")
	waitEvent(t, rec.ch, event.TurnStarted) // send's turn runs: it waits for the reply
	// attach --follow has printed its backlog (nothing) and waits: give it
	// an event to show it is past its calls.
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: live.SessionID, Text: "hello"}, nil); err != nil {
		t.Fatal(err)
	}
	follow.waitLine(t, "> hello")

	pid := d.Cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) }) // runs before the daemon's own cleanup

	procs := []*ctlProc{follow, hold, send, top}
	for _, args := range [][]string{
		{"status"}, {"ls"}, {"show", live.SessionID}, {"create", "--provider", "echo"},
		{"hold", held.SessionID, "--no-wait"}, {"release", live.SessionID, "--holder", "t"},
		{"close", live.SessionID}, {"delete", held.SessionID}, {"send", live.SessionID, "hi"},
		{"attach", live.SessionID}, {"respond", live.SessionID, "r1", "approve"},
		{"top", "--once", "--interval", "100ms"}, {"doctor"}, {"upgrade"}, {"shutdown"},
	} {
		procs = append(procs, startCtl(t, d.Socket, args...))
	}
	want := "(pid " + strconv.Itoa(pid) + ", stopped) did not answer"
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(120 * time.Second):
			t.Fatalf("ctl %v still runs against a stopped daemon:\n%s", p.args, p.output())
		}
		wantCode := exitcode.Error
		if p.args[0] == "doctor" {
			wantCode = exitcode.NoDaemon
		}
		if out := p.output(); p.code != wantCode || !strings.Contains(out, want) || !strings.Contains(out, "kill -CONT "+strconv.Itoa(pid)) {
			t.Errorf("ctl %v: exit %d, want %d and %q:\n%s", p.args, p.code, wantCode, want, out)
		}
	}
	for _, p := range []*ctlProc{follow, hold, send, top} {
		if !strings.Contains(p.output(), "did not answer a daemon.status probe") {
			t.Errorf("ctl %v (waiting when the daemon stopped) does not name the unanswered probe:\n%s", p.args, p.output())
		}
	}
}

// TestE2ECtlTopStalledBetweenFrames: a daemon that stops while `ctl top`
// waits for its next frame (a long --interval) ends top with the stall
// message and exit 1, not a silent exit 0 as after Ctrl-C.
func TestE2ECtlTopStalledBetweenFrames(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t, api.CapAdmin)
	probes := func() uint64 {
		var st struct {
			RPCs map[string]uint64 `json:"rpcs"`
		}
		if err := c.Call(ctx10(t), "daemon.stats", nil, &st); err != nil {
			t.Fatal(err)
		}
		return st.RPCs["daemon.status"]
	}
	base := probes()
	top := startCtl(t, d.Socket, "top", "--interval", "1h")
	// top asks daemon.status once at start, then its watchdog every 5 s:
	// a second one means its first frame's calls are long answered and it
	// waits for the next tick.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(60 * time.Second); probes() < base+2; {
		if time.Now().After(deadline) {
			t.Fatalf("no probe from top:\n%s", top.output())
		}
		<-tick.C
	}
	pid := d.Cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	select {
	case <-top.exited:
	case <-time.After(120 * time.Second):
		t.Fatalf("top still runs against a stopped daemon:\n%s", top.output())
	}
	if out := top.output(); top.code != exitcode.Error || !strings.Contains(out, "did not answer a daemon.status probe") {
		t.Fatalf("top: exit %d, want %d and the stall message:\n%s", top.code, exitcode.Error, out)
	}
}
