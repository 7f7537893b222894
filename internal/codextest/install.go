// Package codextest runs the real `codex app-server` in tests, offline: it
// installs the pinned npm package into a cache directory outside the
// checkout when missing, serves a scripted model (the responses SSE API)
// on 127.0.0.1, and builds a CODEX_HOME whose config points codex at it.
// It is imported only by _test.go files, its install command and the
// benchmark (cmd/sessiond-bench).
package codextest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Version is the pinned codex CLI the tests run.
const Version = "0.169.0"

// Package is the npm package spec installed.
const Package = "@openai/codex@" + Version

// CacheDir is where the package is installed:
// ${XDG_CACHE_HOME:-$HOME/.cache}/sessiond-test/codex@<Version>.
func CacheDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "sessiond-test", "codex@"+Version)
}

// InstallCommand is the command that installs the pinned package by hand.
func InstallCommand() string {
	return fmt.Sprintf("npm install --prefix %q --no-audit --no-fund %s", CacheDir(), Package)
}

var install struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the pinned codex launcher, installing it with
// npm when missing. A machine that cannot install it fails the test with
// the command to run: a missing binary is never a silent skip.
func Binary(t testing.TB) string {
	t.Helper()
	install.once.Do(func() { install.path, install.err = ensure() })
	if install.err != nil {
		t.Fatalf("codex %s is not available: %v\ninstall it with: %s", Version, install.err, InstallCommand())
	}
	return install.path
}

// binPath is the launcher npm links into the prefix.
func binPath(dir string) string { return filepath.Join(dir, "node_modules", ".bin", "codex") }

// Ensure installs the pinned package when missing and returns the
// launcher's path (the install command of `make test`).
func Ensure() (string, error) { return ensure() }

// ensure installs the package once per machine: concurrent test processes
// (one per Go package) serialise on a lock file next to the cache.
func ensure() (string, error) {
	dir := CacheDir()
	bin := binPath(dir)
	if works(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("install lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("install lock: %w", err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	if works(bin) { // another process installed it meanwhile
		return bin, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm not on PATH (install node and npm): %w", err)
	}
	// Install into a fresh directory and rename it into place, so a killed
	// install never leaves a half-populated cache that looks complete.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".codex-install-*")
	if err != nil {
		return "", fmt.Errorf("install dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error", Package)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s: %w\n%s", Package, err, tail(out, 2000))
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if !works(bin) {
		return "", fmt.Errorf("installed %s, but %s --version does not report %s", Package, bin, Version)
	}
	return bin, nil
}

// works reports whether bin runs and is the pinned version.
func works(bin string) bool {
	out, err := exec.Command(bin, "--version").Output()
	return err == nil && strings.Contains(string(out), Version)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
