// Package daemoncore is the part of starting the real sessiond binary that
// needs no testing.TB: finding the module, building ./cmd/sessiond, the
// `sessiond serve` command line and its environment, an exit code. The
// end-to-end harness (internal/testkit/daemontest) and the benchmark command
// (cmd/sessiond-bench) both start daemons through it; each decides what a
// returned error means (a failed test, a failed figure) and how it waits
// for the daemon to be ready.
package daemoncore

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sessiond/sessiond/internal/sysx"
)

// ModuleRoot walks up from the working directory to go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build runs `go build -o out ./cmd/sessiond` in the module root; race adds
// -race, and a non-empty version sets the binary's version string
// (-ldflags -X github.com/sessiond/sessiond/internal/version.buildVersion=version).
func Build(out string, race bool, version string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	args := []string{"build"}
	if race {
		args = append(args, "-race")
	}
	if version != "" {
		args = append(args, "-ldflags", "-X github.com/sessiond/sessiond/internal/version.buildVersion="+version)
	}
	args = append(args, "-o", out, "./cmd/sessiond")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// CleanEnv is this process's environment without SESSIOND_* and XDG_*
// variables: a started daemon (or provider) finds its paths from its flags,
// never from the caller's session.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SESSIOND_") && !strings.HasPrefix(kv, "XDG_") {
			env = append(env, kv)
		}
	}
	return env
}

// Serve is one `sessiond serve` command line.
type Serve struct {
	Socket, StateDir string
	Config           string   // the config file's path
	LogLevel         string   // --log-level; empty: debug (the log is JSON)
	Args             []string // extra serve flags, after the others
	Env              []string // extra KEY=value, after CleanEnv
}

// Argv is the command line after the binary: serve, its paths, the JSON
// log at LogLevel, then Args.
func (s Serve) Argv() []string {
	level := s.LogLevel
	if level == "" {
		level = "debug"
	}
	return append([]string{"serve", "--socket", s.Socket, "--state-dir", s.StateDir, "--config", s.Config,
		"--log-format", "json", "--log-level", level}, s.Args...)
}

// Command is bin running Argv, prepared by Setup.
func (s Serve) Command(bin string) *exec.Cmd {
	cmd := exec.Command(bin, s.Argv()...)
	s.Setup(cmd)
	return cmd
}

// Setup gives cmd (bin running Argv, possibly through a wrapper such as
// socket activation's shell) its environment, CleanEnv then Env, and ties
// it to this process: it gets SIGKILL when this process dies (sysx.Tie).
func (s Serve) Setup(cmd *exec.Cmd) {
	cmd.Env = append(CleanEnv(), s.Env...)
	sysx.Tie(cmd, syscall.SIGKILL)
}

// ExitCode is the exit code behind cmd.Wait's error: 0 for nil, -1 when
// the process did not exit normally or was never waited on.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
