package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// systemdSocket binds a listening socket the way a socket unit does
// (DirectoryMode=0700, SocketMode=0600) and keeps it until the test ends:
// like systemd, the test owns it, not the daemon.
func systemdSocket(t *testing.T, dirMode os.FileMode) *net.UnixListener {
	t.Helper()
	base, err := os.MkdirTemp("", "sda") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "sessiond")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sessiond.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	t.Cleanup(func() { l.Close() })
	os.Chmod(path, 0o600)
	os.Chmod(dir, dirMode)
	return l
}

// TestE2ESocketActivation: started as systemd starts a socket-activated
// service, the daemon serves on fd 3 after its startup steps, its provider
// children inherit no LISTEN_*/NOTIFY_SOCKET, and stopping it leaves the
// socket file (systemd's) in place: a client that connects while no daemon
// runs is answered by the next activation.
func TestE2ESocketActivation(t *testing.T) {
	l := systemdSocket(t, 0o700)
	notify := notifySocket(t)
	d := daemontest.Start(t, daemontest.Options{Activate: l, Env: []string{"NOTIFY_SOCKET=" + notify.LocalAddr().String()}})
	if st := d.Status(t); st.Socket != l.Addr().String() || st.PID != d.Cmd.Process.Pid {
		t.Fatalf("status %+v, want socket %s pid %d", st, l.Addr(), d.Cmd.Process.Pid)
	}
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, &h); err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(h.PID), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"LISTEN_PID=", "LISTEN_FDS=", "NOTIFY_SOCKET="} {
		if strings.Contains("\x00"+string(env), "\x00"+k) {
			t.Fatalf("provider child inherited %s", k)
		}
	}
	c.Close()
	d.Stop()
	if fi, err := os.Lstat(l.Addr().String()); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the daemon removed the socket systemd owns: %v", err)
	}
	// Connect while no daemon runs (the socket unit queues it), then the
	// next activation answers on the same connection.
	waiting := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		wc, err := rpc.Dial(ctx, l.Addr().String(), rpc.ClientOptions{Name: "queued"})
		if err == nil {
			var st rpc.Status
			err = wc.Call(ctx, "daemon.status", nil, &st)
			wc.Close()
		}
		waiting <- err
	}()
	d2 := daemontest.Start(t, daemontest.Options{Activate: l, StateDir: d.StateDir})
	if err := <-waiting; err != nil {
		t.Fatalf("a client queued on the socket unit was not served: %v", err)
	}
	d2.Stop()
}

// TestE2EActivationRefused: activation variables that do not describe one
// listening socket for this process, or a socket in a directory open to
// others, are a clear error and exit 1; the socket file is never removed.
func TestE2EActivationRefused(t *testing.T) {
	bin := daemontest.Binary(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, nil, 0o600)
	regular, err := os.Create(filepath.Join(t.TempDir(), "not-a-socket"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	dirFile, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dirFile.Close()
	wrap := `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`
	tests := []struct {
		name    string
		shell   string // how LISTEN_* are set
		dirMode os.FileMode
		fd3     func(l *net.UnixListener) *os.File
		want    []string
	}{
		{"another pid", `LISTEN_PID=1 LISTEN_FDS=1 exec "$0" "$@"`, 0o700, nil,
			[]string{"socket activation refused", "LISTEN_PID=1 names another process"}},
		{"two fds", `LISTEN_PID=$$ LISTEN_FDS=2 exec "$0" "$@"`, 0o700, nil,
			[]string{"socket activation refused", "exactly one socket"}},
		{"fd 3 a regular file", wrap, 0o700, func(*net.UnixListener) *os.File { return regular },
			[]string{"socket activation refused", "fd 3", "not a socket"}},
		{"directory open to others", wrap, 0o755, nil,
			[]string{"socket directory is not private", "DirectoryMode=0700"}},
		// fd 3 closed at exec: the Go runtime may take the number for a
		// file of its own; the message says so instead of "not a socket".
		{"fd 3 not passed", wrap, 0o700, func(*net.UnixListener) *os.File { return nil },
			[]string{"socket activation refused", "nothing was passed at fd 3", "want a listening AF_UNIX stream socket"}},
		{"fd 3 a directory", wrap, 0o700, func(*net.UnixListener) *os.File { return dirFile },
			[]string{"fd 3 is a directory", "want a listening AF_UNIX stream socket"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := systemdSocket(t, tc.dirMode)
			fd3, err := l.File()
			if err != nil {
				t.Fatal(err)
			}
			defer fd3.Close()
			if tc.fd3 != nil {
				fd3 = tc.fd3(l)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "/bin/sh", "-c", tc.shell, bin, "serve", "--config", cfg,
				"--state-dir", t.TempDir(), "--socket", l.Addr().String(), "--log-format", "json")
			if fd3 != nil {
				cmd.ExtraFiles = []*os.File{fd3}
			}
			cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
			sysx.Tie(cmd, syscall.SIGKILL)
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != exitcode.Error {
				t.Fatalf("exit %v, want %d; output:\n%s", err, exitcode.Error, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Fatalf("output lacks %q:\n%s", w, out)
				}
			}
			if _, err := os.Lstat(l.Addr().String()); err != nil {
				t.Fatalf("socket file removed: %v", err)
			}
		})
	}
}
