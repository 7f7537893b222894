package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/sshtest"
)

// runCtlRemote runs `sessiond ctl --remote HOST ARGS` with env.
func runCtlRemote(t *testing.T, env []string, host string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, daemontest.Binary(t), append([]string{"ctl", "--remote", host}, args...)...)
	cmd.Env = env
	sysx.Tie(cmd, syscall.SIGKILL)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, o.String(), e.String()
}

// TestE2ECtlRemote: `ctl --remote HOST ls` through a real OpenSSH server
// on 127.0.0.1 (`ssh HOST sessiond proxy` on the far side) lists the
// remote daemon's sessions; a host ssh cannot reach is exit 1 with ssh's
// reason, and --remote with --socket is a usage error.
func TestE2ECtlRemote(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	srv := sshtest.Start(t, daemontest.Binary(t), "SESSIOND_SOCKET="+d.Socket, "GORACE=atexit_sleep_ms=0")
	c := d.Client(t)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir(), Title: "over ssh"}, &s); err != nil {
		t.Fatal(err)
	}
	env := srv.Env("GORACE=atexit_sleep_ms=0")

	code, out, errOut := runCtlRemote(t, env, sshtest.Host, "ls")
	if code != exitcode.OK || !strings.Contains(out, s.SessionID) || !strings.Contains(out, "over ssh") {
		t.Fatalf("ls: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCtlRemote(t, env, sshtest.Host, "--json", "ls")
	var ls struct {
		Sessions []api.SessionInfo `json:"sessions"`
	}
	if code != exitcode.OK || json.Unmarshal([]byte(out), &ls) != nil || len(ls.Sessions) != 1 || ls.Sessions[0].SessionID != s.SessionID {
		t.Fatalf("--json ls: exit %d\n%s\n%s", code, out, errOut)
	}

	code, _, errOut = runCtlRemote(t, env, "nohost.invalid", "ls")
	if code != exitcode.Error || !strings.Contains(errOut, "ssh nohost.invalid failed (exit 255)") {
		t.Fatalf("unreachable host: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runCtlRemote(t, env, sshtest.Host, "--socket", d.Socket, "ls")
	if code != exitcode.Usage || !strings.Contains(errOut, "exclude each other") {
		t.Fatalf("--remote with --socket: exit %d\n%s", code, errOut)
	}

	// A remote machine where no daemon runs and none can start (a config
	// the daemon refuses): the remote proxy's exit 3 is ctl's.
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("no_such_key = [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	none := sshtest.Start(t, daemontest.Binary(t), "SESSIOND_SOCKET="+filepath.Join(shortDir(t), "s.sock"),
		"SESSIOND_STATE_DIR="+filepath.Join(dir, "state"), "SESSIOND_CONFIG="+bad, "GORACE=atexit_sleep_ms=0")
	code, _, errOut = runCtlRemote(t, none.Env("GORACE=atexit_sleep_ms=0"), sshtest.Host, "ls")
	if code != exitcode.NoDaemon || !strings.Contains(errOut, "no daemon can be reached on "+sshtest.Host) {
		t.Fatalf("no remote daemon: exit %d\n%s", code, errOut)
	}
}

// TestE2ECtlRemoteInterrupt: Ctrl-C (SIGINT to ctl's process group) during
// `ctl --remote HOST send` cancels the remote turn over the same ssh
// connection: ssh runs in a process group of its own, so it survives the
// signal. (Mutation: ssh in ctl's group dies of the SIGINT and the cancel
// never arrives: red.)
func TestE2ECtlRemoteInterrupt(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	srv := sshtest.Start(t, daemontest.Binary(t), "SESSIOND_SOCKET="+d.Socket, "GORACE=atexit_sleep_ms=0")
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	var at api.AttachResult
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, &at); err != nil {
		t.Fatal(err)
	}
	// The turn waits on an approval, which ctl prints with its `ctl
	// respond` line: ctl is then in its event loop, where Ctrl-C cancels.
	cmd := exec.Command(daemontest.Binary(t), "ctl", "--remote", sshtest.Host, "send", s.SessionID, "/approve")
	cmd.Env = srv.Env("GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group of its own, as a terminal's job
	var e bytes.Buffer
	cmd.Stderr = &e
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	asked := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "respond") {
				once = true
				close(asked)
			}
		}
	}()
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatalf("ctl printed no approval: %s", e.String())
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // Ctrl-C: the whole foreground group
	done := waitEvent(t, rec.ch, event.TurnCompleted)
	var data struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	json.Unmarshal(done.Data, &data)
	if data.Status != event.StatusInterrupted || data.Reason != event.ReasonUserCancel {
		t.Fatalf("turn ended %+v, want interrupted by user_cancel; ctl: %s", data, e.String())
	}
	cmd.Wait()
	if !strings.Contains(e.String(), "interrupted; turn cancelled") {
		t.Fatalf("ctl stderr: %s", e.String())
	}
}
