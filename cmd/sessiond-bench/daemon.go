package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest/daemoncore"
)

// bench holds what every figure shares: the daemon binary, a private temp
// root (every state dir lives under it, so a process whose environment names
// it is ours) and the figures so far.
type bench struct {
	bin  string
	root string
	sz   sizes
	log  io.Writer
	figs []figure
	n    atomic.Int64
}

func newBench(bin string, sz sizes, log io.Writer) (*bench, error) {
	root, err := os.MkdirTemp("", "sdbench") // short: sun_path is 108 bytes
	if err != nil {
		return nil, err
	}
	b := &bench{bin: bin, root: root, sz: sz, log: log}
	if b.bin == "" {
		b.bin = filepath.Join(root, "sessiond")
		if err := buildDaemon(b.bin); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
	}
	return b, nil
}

func (b *bench) cleanup() { os.RemoveAll(b.root) }

// dir returns a fresh directory under the root.
func (b *bench) dir(name string) string {
	d := filepath.Join(b.root, fmt.Sprintf("%s%d", name, b.n.Add(1)))
	os.MkdirAll(d, 0o700)
	return d
}

func buildDaemon(out string) error {
	if _, err := daemoncore.ModuleRoot(); err != nil {
		return fmt.Errorf("%w (use --sessiond)", err)
	}
	return daemoncore.Build(out, false, "")
}

// daemon is one running sessiond.
type daemon struct {
	socket, stateDir string
	cmd              *exec.Cmd
	exited           chan struct{}
	started          time.Time // just before exec
	ready            time.Duration
	logPath          string
}

// startDaemon runs `sessiond serve` with config (TOML) on stateDir (empty: a
// fresh one) and returns once the socket accepts a connection.
func (b *bench) startDaemon(stateDir, config string) (*daemon, error) {
	run := b.dir("d")
	if stateDir == "" {
		stateDir = filepath.Join(run, "state")
	}
	d := &daemon{socket: filepath.Join(run, "s.sock"), stateDir: stateDir, exited: make(chan struct{}),
		logPath: filepath.Join(run, "daemon.log")}
	cfg := filepath.Join(run, "config.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(d.logPath)
	if err != nil {
		return nil, err
	}
	d.cmd = daemoncore.Serve{Socket: d.socket, StateDir: stateDir, Config: cfg, LogLevel: "info"}.Command(b.bin)
	d.cmd.Stderr = logf
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	logf.Close()
	go func() { d.cmd.Wait(); close(d.exited) }()
	// Poll: nothing signals "accepting" to another process but a connect.
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("unix", d.socket)
		if err == nil {
			d.ready = time.Since(d.started)
			c.Close()
			return d, nil
		}
		select {
		case <-d.exited:
			return nil, fmt.Errorf("sessiond exited before accepting: %s", tail(d.logPath))
		default:
		}
		if time.Now().After(deadline) {
			d.kill()
			return nil, fmt.Errorf("sessiond not accepting after 60 s: %s", tail(d.logPath))
		}
		time.Sleep(500 * time.Microsecond)
	}
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// stop asks for a clean shutdown (SIGTERM) and waits; SIGKILL after 30 s.
// It first waits for the startup's listen step to be logged: the socket
// accepts a moment before Startup returns, and a SIGTERM in that window
// makes the daemon report a failed startup and exit 1.
func (d *daemon) stop() error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if b, _ := os.ReadFile(d.logPath); bytes.Contains(b, []byte(`"step":"listen"`)) {
			break
		}
		time.Sleep(time.Millisecond) // another process's log: nothing to wait on but the file
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.kill()
		return fmt.Errorf("sessiond did not stop within 30 s: %s", tail(d.logPath))
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("sessiond exited %d: %s", code, tail(d.logPath))
	}
	return nil
}

func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// client dials with every capability.
func (d *daemon) client(ctx context.Context, onNotify func(string, []byte)) (*rpc.Client, error) {
	o := rpc.ClientOptions{Name: "sessiond-bench"}
	if onNotify != nil {
		o.OnNotify = func(m string, p json.RawMessage) { onNotify(m, p) }
	}
	return rpc.Dial(ctx, d.socket, o)
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
