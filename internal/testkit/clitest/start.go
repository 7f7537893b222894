// Package clitest runs a provider's CLI straight over its stdio, for the
// adapter-level tests (no daemon): Start spawns the command with pipes,
// StartAdapter also drives it with a provider.Adapter and stops it as the
// daemon does.
package clitest

import (
	"io"
	"os/exec"
	"syscall"
	"testing"
)

// Start starts cmd in a process group of its own with pipes to its stdin
// and stdout, failing t on any error.
func Start(t testing.TB, cmd *exec.Cmd) (in io.WriteCloser, out io.ReadCloser) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return in, out
}
