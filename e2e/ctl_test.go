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
)

// runCtl runs `sessiond ctl --socket S ARGS` in dir.
func runCtl(t *testing.T, socket, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, daemontest.Binary(t), append([]string{"ctl", "--socket", socket}, args...)...)
	cmd.Dir = dir
	cmd.Env = ctlEnviron(t)
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

// TestE2ECtl: the README's path: create an echo session in ".", list it,
// send a message and read the reply, attach, close, delete; and the exit
// codes scripts rely on.
func TestE2ECtl(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	dir := t.TempDir()
	code, out, errOut := runCtl(t, d.Socket, dir, "--json", "create", "--provider", "echo", "--cwd", ".", "--title", "demo")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var s api.SessionInfo
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Cwd != dir || s.Provider != "echo" {
		t.Fatalf("create printed %q (%v), want cwd %s", out, err, dir)
	}
	code, out, _ = runCtl(t, d.Socket, dir, "ls")
	if code != 0 || !strings.Contains(out, s.SessionID) || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "demo") {
		t.Fatalf("ls: %d\n%s", code, out)
	}
	code, out, errOut = runCtl(t, d.Socket, dir, "send", s.SessionID, "hello there")
	if code != 0 || strings.TrimSpace(out) != "echo: hello there" {
		t.Fatalf("send: %d %q %s", code, out, errOut)
	}
	// the daemon gave the echo provider its home under the state dir
	if ents, err := os.ReadDir(filepath.Join(d.StateDir, "providers", "echo")); err != nil || len(ents) == 0 {
		t.Fatalf("echo home under the state dir: %v %v", ents, err)
	}
	code, out, _ = runCtl(t, d.Socket, dir, "attach", s.SessionID, "--after", "1")
	if code != 0 || !strings.Contains(out, "turn.completed") || strings.Contains(out, "session.created") {
		t.Fatalf("attach --after 1: %d\n%s", code, out)
	}
	code, out, errOut = runCtl(t, d.Socket, dir, "--json", "status")
	if code != 0 || !strings.Contains(out, `"stateId": "`+d.StateID+`"`) {
		t.Fatalf("status: %d %s %s", code, out, errOut)
	}
	if code, out, errOut = runCtl(t, d.Socket, dir, "close", s.SessionID); code != 0 {
		t.Fatalf("close: %d %s %s", code, out, errOut)
	}
	if code, _, errOut = runCtl(t, d.Socket, dir, "delete", s.SessionID); code != 0 {
		t.Fatalf("delete: %d %s", code, errOut)
	}
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("tagged processes after close: %v", pids)
	}

	exits := []struct {
		name   string
		socket string
		args   []string
		code   int
		errHas string
	}{
		{"daemon error", d.Socket, []string{"show", "s_nosuchsession"}, exitcode.Error, "session_not_found"},
		{"bad id", d.Socket, []string{"show", "../../x"}, exitcode.Error, "invalid_params"},
		{"usage", d.Socket, []string{"show"}, exitcode.Usage, "usage"},
		{"unknown subcommand", d.Socket, []string{"frob"}, exitcode.Usage, "unknown subcommand"},
		{"create without provider", d.Socket, []string{"create"}, exitcode.Usage, "--provider"},
		{"no daemon", filepath.Join(t.TempDir(), "none.sock"), []string{"ls"}, exitcode.NoDaemon, "sessiond serve"},
	}
	for _, tc := range exits {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCtl(t, tc.socket, dir, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.errHas) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, errOut, tc.errHas)
			}
		})
	}
}
