// Package daemontest starts the real sessiond binary for end-to-end tests:
// a temp socket and state dir per daemon, a ready signal read from its log,
// and a leak check for processes carrying its state id. Import it only
// from _test.go files.
package daemontest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest/daemoncore"
)

// Options configure Start.
type Options struct {
	Config   string   // TOML text; empty: an empty file (built-in defaults)
	Env      []string // extra KEY=value for the daemon
	StateDir string   // reuse a state dir (a restart); empty: a fresh one
	Args     []string // extra serve flags
	// Activate passes this listening socket as fd 3 with LISTEN_FDS=1 and
	// LISTEN_PID set to the daemon's own pid, exactly as systemd's socket
	// activation does (through `sh -c 'LISTEN_PID=$$ exec …'`); the
	// daemon's Socket is then the listener's path. The caller keeps and
	// closes the listener.
	Activate *net.UnixListener
}

// Daemon is one running sessiond.
type Daemon struct {
	Socket, StateDir, ConfigPath string
	StateID                      string // from the daemon's "listening" log line
	Cmd                          *exec.Cmd
	Log                          *SyncBuffer // the daemon's stderr (JSON log lines)

	t        testing.TB
	exited   chan struct{}
	exitCode int
	cgroup   atomic.Pointer[string] // sessiond-<stateId> in cgroup mode (from its log line)
}

// SyncBuffer is a bytes.Buffer safe for a writer goroutine and readers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stateIDs maps state dirs started here to their ids (TaggedProcesses
// accepts either).
var stateIDs sync.Map

// Start runs `sessiond serve` on a temp socket and state dir and returns
// once it accepts. The daemon dies with the test process (Pdeathsig) and is
// killed in t.Cleanup if still running; leftover tagged processes are
// killed there too.
func Start(t testing.TB, o Options) *Daemon {
	t.Helper()
	bin := Binary(t)
	sockDir, err := os.MkdirTemp("", "sd") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	d := &Daemon{Socket: filepath.Join(sockDir, "run", "sessiond.sock"), StateDir: o.StateDir, t: t,
		Log: &SyncBuffer{}, exited: make(chan struct{})}
	if d.StateDir == "" {
		d.StateDir = t.TempDir()
	}
	d.ConfigPath = filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(d.ConfigPath, []byte(o.Config), 0o600); err != nil {
		t.Fatal(err)
	}
	if o.Activate != nil {
		d.Socket = o.Activate.Addr().String()
	}
	// A race-built binary sleeps 1 s at exit by default; the echo
	// children (this binary too) inherit the setting.
	s := daemoncore.Serve{Socket: d.Socket, StateDir: d.StateDir, Config: d.ConfigPath, Args: o.Args,
		Env: append([]string{"GORACE=atexit_sleep_ms=0"}, o.Env...)}
	if o.Activate != nil {
		d.Cmd = activated(t, o.Activate, bin, s.Argv())
		s.Setup(d.Cmd)
	} else {
		d.Cmd = s.Command(bin)
	}
	stderr, err := d.Cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		d.scanLog(stderr, ready)
	}()
	go func() {
		<-logDone // Wait closes the pipe: read it all first
		err := d.Cmd.Wait()
		d.exitCode = daemoncore.ExitCode(err)
		close(d.exited)
	}()
	t.Cleanup(d.cleanup)
	select {
	case d.StateID = <-ready:
		stateIDs.Store(d.StateDir, d.StateID)
	case <-d.exited:
		t.Fatalf("sessiond exited %d before listening:\n%s", d.exitCode, d.Log.String())
	case <-time.After(60 * time.Second):
		d.Kill()
		t.Fatalf("sessiond did not listen within 60 s:\n%s", d.Log.String())
	}
	return d
}

// scanLog copies the daemon's stderr into Log and reports the state id
// of its "listening" line.
func (d *Daemon) scanLog(r io.Reader, ready chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	sent := false
	for sc.Scan() {
		line := sc.Bytes()
		d.Log.Write(append(append([]byte{}, line...), '\n'))
		d.noteCgroup(line)
		if sent || !bytes.Contains(line, []byte(`"listening"`)) {
			continue
		}
		var rec struct {
			Msg     string `json:"msg"`
			StateID string `json:"state_id"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
			ready <- rec.StateID
			sent = true
		}
	}
	io.Copy(io.Discard, r)
}

func (d *Daemon) cleanup() {
	select {
	case <-d.exited:
	default:
		d.Kill()
	}
	d.removeCgroups()
	if d.StateID == "" {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := TaggedProcesses(d.StateID)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			d.t.Logf("daemontest: killed leftover processes of state %s: %v", d.StateID, pids)
			return
		}
		time.Sleep(20 * time.Millisecond) // no signal for another process's exit
	}
}

// Client dials the daemon (line framing) asking for caps (none = all).
func (d *Daemon) Client(t testing.TB, caps ...string) *rpc.Client {
	return d.ClientFraming(t, rpc.FramingLines, caps...)
}

// ClientFraming dials with the given framing.
func (d *Daemon) ClientFraming(t testing.TB, f rpc.Framing, caps ...string) *rpc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := rpc.ClientOptions{Name: "daemontest", Framing: f}
	if len(caps) > 0 {
		o.Capabilities = caps
	}
	c, err := rpc.Dial(ctx, d.Socket, o)
	if err != nil {
		t.Fatalf("dial %s: %v\n%s", d.Socket, err, d.Log.String())
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Status calls daemon.status.
func (d *Daemon) Status(t testing.TB) rpc.Status {
	t.Helper()
	var st rpc.Status
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Client(t).Call(ctx, "daemon.status", nil, &st); err != nil {
		t.Fatalf("daemon.status: %v", err)
	}
	return st
}

// Kill sends SIGKILL and waits.
func (d *Daemon) Kill() {
	d.Cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// Stop sends SIGTERM, waits, and expects exit 0.
func (d *Daemon) Stop() {
	d.t.Helper()
	d.Cmd.Process.Signal(syscall.SIGTERM)
	if code := d.Wait(30 * time.Second); code != 0 {
		d.t.Errorf("sessiond exited %d after SIGTERM:\n%s", code, d.Log.String())
	}
}

// Wait waits up to timeout for the daemon to exit and returns its code
// (-1 and a test error on timeout).
func (d *Daemon) Wait(timeout time.Duration) int {
	d.t.Helper()
	select {
	case <-d.exited:
		return d.exitCode
	case <-time.After(timeout):
		d.t.Errorf("sessiond still running after %v:\n%s", timeout, d.Log.String())
		return -1
	}
}

// Exited is closed once the daemon process has exited.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }
