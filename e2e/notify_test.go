package e2e

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// notifySocket is the test's own NOTIFY_SOCKET: a datagram socket systemd
// would listen on.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// nextNotify waits for one datagram.
func nextNotify(t *testing.T, c *net.UnixConn, within time.Duration) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no sd_notify datagram within %v: %v", within, err)
	}
	return string(buf[:n])
}

// queuedNotifies drains what is already queued (the sender has exited, so
// every datagram it sent is in the queue).
func queuedNotifies(c *net.UnixConn) []string {
	var out []string
	buf := make([]byte, 4096)
	for {
		c.SetReadDeadline(time.Now())
		n, err := c.Read(buf)
		if err != nil {
			return out
		}
		out = append(out, string(buf[:n]))
	}
}

// serveRaw starts `sessiond serve` without waiting for it to listen.
func serveRaw(t *testing.T, socket string, env ...string) (*exec.Cmd, *daemontest.SyncBuffer, chan error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, nil, 0o600)
	cmd := exec.Command(daemontest.Binary(t), "serve", "--socket", socket, "--state-dir", t.TempDir(),
		"--config", cfg, "--log-format", "json", "--log-level", "debug")
	out := &daemontest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), env...)
	sysx.Tie(cmd, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		done <- cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	return cmd, out, done
}

// TestE2ENotifyReadyStopping: READY=1 comes only once the socket accepts
// (a dial right after it succeeds), STOPPING=1 when SIGTERM starts the
// shutdown, then exit 0.
func TestE2ENotifyReadyStopping(t *testing.T) {
	n := notifySocket(t)
	dir, _ := os.MkdirTemp("", "sdr")
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "run", "sessiond.sock")
	cmd, out, done := serveRaw(t, socket, "NOTIFY_SOCKET="+n.LocalAddr().String())
	if got := nextNotify(t, n, 60*time.Second); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1\n%s", got, out.String())
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatalf("READY=1 sent before the socket accepts: %v\n%s", err, out.String())
	}
	c.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	if got := nextNotify(t, n, 60*time.Second); got != "STOPPING=1" {
		t.Fatalf("after SIGTERM: %q, want STOPPING=1", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, out.String())
	}
}

// TestE2ENotifyNoReadyOnFailedStartup: a listen step that fails (the
// socket path is a regular file) never reports READY=1.
func TestE2ENotifyNoReadyOnFailedStartup(t *testing.T) {
	n := notifySocket(t)
	dir, _ := os.MkdirTemp("", "sdr")
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "sessiond.sock")
	os.WriteFile(socket, []byte("not a socket"), 0o600)
	_, out, done := serveRaw(t, socket, "NOTIFY_SOCKET="+n.LocalAddr().String())
	var ee *exec.ExitError
	if err := <-done; !errors.As(err, &ee) || ee.ExitCode() != exitcode.Error {
		t.Fatalf("exit %v, want %d\n%s", err, exitcode.Error, out.String())
	}
	for _, m := range queuedNotifies(n) {
		if m == "READY=1" {
			t.Fatalf("READY=1 sent although startup failed\n%s", out.String())
		}
	}
}

// TestE2ENotifyBadSocketIgnored: an unusable NOTIFY_SOCKET is logged and
// ignored (as sd_notify does); the daemon serves.
func TestE2ENotifyBadSocketIgnored(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Env: []string{"NOTIFY_SOCKET=relative/notify"}})
	d.Status(t)
	if !strings.Contains(d.Log.String(), "NOTIFY_SOCKET ignored") {
		t.Fatalf("no warning for a relative NOTIFY_SOCKET:\n%s", d.Log.String())
	}
}
