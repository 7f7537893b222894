package daemontest

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary builds ./cmd/sessiond once per test process (with -race when the
// tests run with it) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() { build.path, build.err = buildBinary() })
	if build.err != nil {
		t.Fatalf("build sessiond: %v", build.err)
	}
	return build.path
}

func buildBinary() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	// One directory per checkout: two checkouts testing at once (two
	// worktrees, or a clone beside the main one) must not replace each
	// other's binary between a build and its use.
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("sessiond-daemontest-%d-%x", os.Getuid(), sum[:6]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := "sessiond"
	args := []string{"build"}
	if raceEnabled {
		name += "-race"
		args = append(args, "-race")
	}
	out := filepath.Join(dir, name)
	// Build to a private name, then rename: test processes of several
	// packages may build at once.
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	args = append(args, "-o", tmp.Name(), "./cmd/sessiond")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}

// moduleRoot walks up from the working directory to go.mod.
func moduleRoot() (string, error) {
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
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
