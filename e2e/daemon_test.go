package e2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// runDaemonExpectExit runs `sessiond serve ARGS` expecting it to exit by
// itself; it returns the exit code and the combined output.
func runDaemonExpectExit(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, nil, 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, daemontest.Binary(t), append([]string{"serve", "--config", cfg, "--log-format", "json"}, args...)...)
	sysx.Tie(cmd, syscall.SIGKILL)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("daemon did not exit: %s", out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, string(out)
}

// TestE2ESecondDaemon: a second daemon on the same state dir fails on the
// store's flock naming it; one on the same socket with another state dir
// refuses naming the socket; the first keeps serving in both cases.
func TestE2ESecondDaemon(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	other := filepath.Join(filepath.Dir(d.Socket), "other.sock")
	code, out := runDaemonExpectExit(t, "--socket", other, "--state-dir", d.StateDir)
	if code == 0 || !strings.Contains(out, "another sessiond is running on this state directory") || !strings.Contains(out, d.StateDir) {
		t.Fatalf("same state dir: exit %d, output:\n%s", code, out)
	}
	if _, err := os.Stat(other); err == nil {
		t.Fatal("the refused daemon created its socket")
	}
	code, out = runDaemonExpectExit(t, "--socket", d.Socket, "--state-dir", t.TempDir())
	if code == 0 || !strings.Contains(out, "another sessiond is accepting on this socket") || !strings.Contains(out, d.Socket) {
		t.Fatalf("same socket: exit %d, output:\n%s", code, out)
	}
	if st := d.Status(t); st.PID != d.Cmd.Process.Pid {
		t.Fatalf("first daemon replaced: %+v", st)
	}
}

// TestE2EPeerUIDRefused: a client running as another uid is closed
// without an answer and the refusal is logged.
func TestE2EPeerUIDRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as uid 65534")
	}
	d := daemontest.Start(t, daemontest.Options{})
	// Let uid 65534 reach the socket, so the peer check is what refuses it.
	os.Chmod(filepath.Dir(filepath.Dir(d.Socket)), 0o711)
	os.Chmod(filepath.Dir(d.Socket), 0o711)
	os.Chmod(d.Socket, 0o666)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := os.MkdirTemp("", "sdpeer")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	os.Chmod(binDir, 0o755)
	helper := filepath.Join(binDir, "helper")
	copyFile(t, exe, helper)
	cmd := exec.Command(helper)
	cmd.Env = []string{"SESSIOND_E2E_HELPER=peer", "SESSIOND_E2E_SOCKET=" + d.Socket, "GORACE=atexit_sleep_ms=0"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	sysx.Tie(cmd, syscall.SIGKILL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid 65534: %v (want exit 0: closed without answer): %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.Log.String(), `"peer_uid":65534`) {
		if time.Now().After(deadline) {
			t.Fatalf("refusal not logged:\n%s", d.Log.String())
		}
		time.Sleep(10 * time.Millisecond) // the log is the only signal
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
}

// TestE2EGracefulShutdown: SIGTERM and daemon.shutdown both evict the live
// session, exit 0, remove the socket and leave no tagged process.
func TestE2EGracefulShutdown(t *testing.T) {
	tests := []struct {
		name string
		stop func(t *testing.T, d *daemontest.Daemon, c *rpc.Client)
	}{
		{"SIGTERM", func(t *testing.T, d *daemontest.Daemon, c *rpc.Client) { d.Stop() }},
		{"daemon.shutdown", func(t *testing.T, d *daemontest.Daemon, c *rpc.Client) {
			if err := c.Call(ctx10(t), "daemon.shutdown", nil, nil); err != nil {
				t.Fatal(err)
			}
			if code := d.Wait(30 * time.Second); code != 0 {
				t.Fatalf("exit %d after daemon.shutdown:\n%s", code, d.Log.String())
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := daemontest.Start(t, daemontest.Options{})
			c := d.Client(t)
			var s api.SessionInfo
			if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
				t.Fatal(err)
			}
			var h api.HoldResult
			if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, &h); err != nil {
				t.Fatal(err)
			}
			if len(daemontest.TaggedProcesses(d.StateID)) == 0 {
				t.Fatal("no tagged provider process while held")
			}
			tc.stop(t, d, c)
			if _, err := os.Lstat(d.Socket); !os.IsNotExist(err) {
				t.Fatalf("socket left after shutdown: %v", err)
			}
			if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
				t.Fatalf("tagged processes left: %v", pids)
			}
			if !strings.Contains(d.Log.String(), `"msg":"stopped"`) {
				t.Fatalf("no clean stop logged:\n%s", d.Log.String())
			}
		})
	}
}
