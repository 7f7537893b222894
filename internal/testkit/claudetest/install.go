// Package claudetest runs the real Claude Code CLI in tests, offline: it
// installs the pinned npm package into the test cache when missing (the
// same cache and installer as codextest), serves a scripted Messages API
// on 127.0.0.1, and builds the environment that points the CLI at it.
// It is imported only by _test.go files, its install command and the
// benchmark (cmd/sessiond-bench).
package claudetest

import (
	"io"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/npminstall"
)

// Version is the pinned Claude Code CLI the tests run.
const Version = "2.1.328"

// Package is the npm package spec installed.
const Package = "@anthropic-ai/claude-code@" + Version

// pkg: ${XDG_CACHE_HOME:-$HOME/.cache}/sessiond-test/claude-code@<Version>.
var pkg = &npminstall.Package{Spec: Package, Dir: "claude-code@" + Version, Bin: "claude", Version: Version}

// CacheDir is where the package is installed.
func CacheDir() string { return pkg.CacheDir() }

// InstallCommand is the command that installs the pinned package by hand.
func InstallCommand() string { return pkg.InstallCommand() }

// Ensure installs the pinned package when missing and returns the path of
// the `claude` executable (the install command of `make test`).
func Ensure() (string, error) { return pkg.Ensure() }

// Binary returns the path of the pinned `claude`, installing it with npm
// when missing; a machine that cannot install it fails the test with the
// command to run.
func Binary(t testing.TB) string {
	t.Helper()
	return pkg.Binary(t)
}

// Install is the body of the install command (`make test` runs it first):
// Ensure, reported on stdout or stderr; it returns the exit code.
func Install(stdout, stderr io.Writer) int { return pkg.Install(stdout, stderr) }
