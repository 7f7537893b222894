package daemoncore

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCleanEnv(t *testing.T) {
	t.Setenv("SESSIOND_SOCKET", "/elsewhere.sock")
	t.Setenv("XDG_STATE_HOME", "/elsewhere")
	t.Setenv("DAEMONCORE_KEPT", "yes")
	env := CleanEnv()
	for _, kv := range env {
		if strings.HasPrefix(kv, "SESSIOND_") || strings.HasPrefix(kv, "XDG_") {
			t.Errorf("CleanEnv kept %s", kv)
		}
	}
	if !slices.Contains(env, "DAEMONCORE_KEPT=yes") {
		t.Errorf("CleanEnv dropped DAEMONCORE_KEPT: %v", env)
	}
}

func TestServeCommand(t *testing.T) {
	s := Serve{Socket: "/r/s.sock", StateDir: "/r/state", Config: "/r/c.toml", Args: []string{"--extra"},
		Env: []string{"EXTRA=1"}}
	want := []string{"serve", "--socket", "/r/s.sock", "--state-dir", "/r/state", "--config", "/r/c.toml",
		"--log-format", "json", "--log-level", "debug", "--extra"}
	if got := s.Argv(); !slices.Equal(got, want) {
		t.Errorf("Argv = %q, want %q", got, want)
	}
	s.LogLevel = "info"
	cmd := s.Command("/bin/sessiond")
	if got := cmd.Args[len(cmd.Args)-2]; got != "info" {
		t.Errorf("--log-level %q, want info", got)
	}
	if cmd.Path != "/bin/sessiond" || cmd.Env[len(cmd.Env)-1] != "EXTRA=1" {
		t.Errorf("Command: path %s, env ends %q", cmd.Path, cmd.Env[len(cmd.Env)-1])
	}
	if cmd.SysProcAttr == nil {
		t.Error("Command is not tied to this process")
	}
}

func TestExitCode(t *testing.T) {
	err := exec.Command("/bin/sh", "-c", "exit 3").Run()
	for _, tc := range []struct {
		err  error
		want int
	}{{nil, 0}, {err, 3}, {errors.New("never started"), -1}} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("ModuleRoot %s: %v", root, err)
	}
	t.Chdir(t.TempDir())
	if _, err := ModuleRoot(); err == nil {
		t.Error("ModuleRoot outside the module: no error")
	}
}
