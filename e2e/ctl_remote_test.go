package e2e

import (
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
	"github.com/sessiond/sessiond/internal/exitcode"
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
