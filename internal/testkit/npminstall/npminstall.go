// Package npminstall installs a pinned npm package (a provider CLI the
// real-provider tests run) into a cache directory outside the checkout,
// ${XDG_CACHE_HOME:-$HOME/.cache}/sessiond-test/<name>@<version>, once per
// machine: concurrent test processes serialise on a lock file, and an
// install goes to a fresh directory renamed into place, so a killed install
// never leaves a cache that looks complete. It is imported only by test
// helper packages (codextest, claudetest) and their install commands.
package npminstall

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Package is one pinned npm package and the executable it links.
type Package struct {
	Spec    string // npm spec, e.g. "@openai/codex@0.169.0"
	Dir     string // cache directory name, e.g. "codex@0.169.0"
	Bin     string // the executable npm links into node_modules/.bin
	Version string // what `<bin> --version` must report
	// Manifest, when set, is the installed package whose package.json
	// "version" must be Version instead (for a bin without --version).
	Manifest string

	once    sync.Once // Binary's Ensure, once per process
	binPath string
	err     error
}

// Binary returns the executable's path, installing the package with npm
// (once per process) when missing. A machine that cannot install it fails
// the test with the command to run: a missing binary is never a silent
// skip.
func (p *Package) Binary(t testing.TB) string {
	t.Helper()
	p.once.Do(func() { p.binPath, p.err = p.Ensure() })
	if p.err != nil {
		t.Fatalf("%s %s is not available: %v\ninstall it with: %s", p.Bin, p.Version, p.err, p.InstallCommand())
	}
	return p.binPath
}

// Install is the body of an install command (`make test` runs one per
// package first, so a fresh clone gets it once, before the tests start,
// with npm's output on the terminal): Ensure, then the path on stdout or
// the error and the command to run by hand on stderr; it returns the exit
// code.
func (p *Package) Install(stdout, stderr io.Writer) int {
	bin, err := p.Ensure()
	if err != nil {
		fmt.Fprintf(stderr, "install %s %s: %v\ninstall it by hand with: %s\n", p.Bin, p.Version, err, p.InstallCommand())
		return 1
	}
	fmt.Fprintln(stdout, p.Bin, p.Version, "at", bin)
	return 0
}

// CacheDir is where the package is installed.
func (p *Package) CacheDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "sessiond-test", p.Dir)
}

// InstallCommand is the command that installs the package by hand.
func (p *Package) InstallCommand() string {
	return fmt.Sprintf("npm install --prefix %q --no-audit --no-fund %s", p.CacheDir(), p.Spec)
}

// BinPath is the executable's path inside dir.
func (p *Package) BinPath(dir string) string {
	return filepath.Join(dir, "node_modules", ".bin", p.Bin)
}

// Ensure installs the package when missing and returns the executable's
// path.
func (p *Package) Ensure() (string, error) {
	dir := p.CacheDir()
	bin := p.BinPath(dir)
	if p.works(bin) {
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
	if p.works(bin) { // another process installed it meanwhile
		return bin, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm not on PATH (install node and npm): %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+p.Bin+"-install-*")
	if err != nil {
		return "", fmt.Errorf("install dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error", p.Spec)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s: %w\n%s", p.Spec, err, Tail(out, 2000))
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if !p.works(bin) {
		return "", fmt.Errorf("installed %s, but %s --version does not report %s", p.Spec, bin, p.Version)
	}
	return bin, nil
}

// works reports whether bin runs and is the pinned version.
func (p *Package) works(bin string) bool {
	if p.Manifest != "" {
		return p.manifestVersion(bin) == p.Version
	}
	out, err := exec.Command(bin, "--version").Output()
	return err == nil && strings.Contains(string(out), p.Version)
}

// Tail is the last n bytes of b.
func Tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// manifestVersion is the "version" of Manifest's package.json next to
// bin's node_modules/.bin, "" when bin or the manifest is missing.
func (p *Package) manifestVersion(bin string) string {
	if _, err := os.Stat(bin); err != nil {
		return ""
	}
	nm := filepath.Dir(filepath.Dir(bin))
	b, err := os.ReadFile(filepath.Join(nm, filepath.FromSlash(p.Manifest), "package.json"))
	if err != nil {
		return ""
	}
	var m struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	return m.Version
}
