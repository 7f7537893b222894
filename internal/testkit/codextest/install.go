// Package codextest runs the real `codex app-server` in tests, offline: it
// installs the pinned npm package into a cache directory outside the
// checkout when missing, serves a scripted model (the responses SSE API)
// on 127.0.0.1, and builds a CODEX_HOME whose config points codex at it.
// It is imported only by _test.go files, its install command and the
// benchmark (cmd/sessiond-bench).
package codextest

import (
	"io"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/npminstall"
)

// Version is the pinned codex CLI the tests run.
const Version = "0.169.0"

// Package is the npm package spec installed.
const Package = "@openai/codex@" + Version

// pkg is the pinned package and where it is cached:
// ${XDG_CACHE_HOME:-$HOME/.cache}/sessiond-test/codex@<Version>.
var pkg = &npminstall.Package{Spec: Package, Dir: "codex@" + Version, Bin: "codex", Version: Version}

// CacheDir is where the package is installed.
func CacheDir() string { return pkg.CacheDir() }

// InstallCommand is the command that installs the pinned package by hand.
func InstallCommand() string { return pkg.InstallCommand() }

// Binary returns the path of the pinned `codex`, installing it with npm
// when missing; a machine that cannot install it fails the test with the
// command to run.
func Binary(t testing.TB) string {
	t.Helper()
	return pkg.Binary(t)
}

// Ensure installs the pinned package when missing and returns the
// launcher's path (the install command of `make test`).
func Ensure() (string, error) { return ensure() }

func ensure() (string, error) { return pkg.Ensure() }

// Install is the body of the install command (`make test` runs it first):
// Ensure, reported on stdout or stderr; it returns the exit code.
func Install(stdout, stderr io.Writer) int { return pkg.Install(stdout, stderr) }
