// Package acptest is what the ACP tests share: the pinned
// @agentclientprotocol/sdk whose JSON Schema every message is checked
// against (Conformance), and the pinned codex-acp agent the real-agent
// tests run offline against the codex test model server (CodexACP). Both
// are installed with npm into the test cache, like the other CLIs
// (internal/testkit/npminstall); a machine that cannot install them fails the
// test with the command to run, never skips. It is imported only by
// _test.go files, its install command and the benchmark.
package acptest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/testkit/npminstall"
)

// The pinned packages.
const (
	SDKVersion      = "2.4.0"
	SDKPackage      = "@agentclientprotocol/sdk@" + SDKVersion
	CodexACPVersion = "0.16.0"
	CodexACPPackage = "@zed-industries/codex-acp@" + CodexACPVersion
)

// pkg is an npm package installed into the test cache, checked by the
// version in its package.json (neither has a --version that says it).
type pkg struct {
	spec, name, version, dir string
	once                     sync.Once
	path                     string
	err                      error
}

var (
	sdk      = &pkg{spec: SDKPackage, name: "@agentclientprotocol/sdk", version: SDKVersion, dir: "acp-sdk@" + SDKVersion}
	codexACP = &pkg{spec: CodexACPPackage, name: "@zed-industries/codex-acp", version: CodexACPVersion, dir: "codex-acp@" + CodexACPVersion}
)

func (p *pkg) cacheDir() string { return (&npminstall.Package{Dir: p.dir}).CacheDir() }

func (p *pkg) installCommand() string {
	return fmt.Sprintf("npm install --prefix %q --no-audit --no-fund %s", p.cacheDir(), p.spec)
}

// works: the package is installed at its pinned version under dir.
func (p *pkg) works(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", p.name, "package.json"))
	var v struct {
		Version string `json:"version"`
	}
	return err == nil && json.Unmarshal(b, &v) == nil && v.Version == p.version
}

// ensure installs the package when missing (serialised on a lock file,
// into a fresh directory renamed into place) and returns its directory.
func (p *pkg) ensure() (string, error) {
	dir := p.cacheDir()
	if p.works(dir) {
		return dir, nil
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
	if p.works(dir) {
		return dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm not on PATH (install node and npm): %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(p.dir)+"-install-*")
	if err != nil {
		return "", fmt.Errorf("install dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command(npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error", p.spec).CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s: %w\n%s", p.spec, err, npminstall.Tail(out, 2000))
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if !p.works(dir) {
		return "", fmt.Errorf("installed %s, but %s is not at version %s", p.spec, p.name, p.version)
	}
	return dir, nil
}

// get is ensure once per process; a failure fails t with the command.
func (p *pkg) get(t testing.TB) string {
	t.Helper()
	p.once.Do(func() { p.path, p.err = p.ensure() })
	if p.err != nil {
		t.Fatalf("%s is not available: %v\ninstall it with: %s", p.spec, p.err, p.installCommand())
	}
	return p.path
}

// SchemaPath is the pinned SDK's ACP v1 JSON Schema.
func SchemaPath(t testing.TB) string {
	t.Helper()
	return filepath.Join(sdk.get(t), "node_modules", "@agentclientprotocol", "sdk", "schema", "v1", "schema.json")
}

// CodexACP is the pinned codex-acp's native binary (the npm launcher is a
// node process that only execs it).
func CodexACP(t testing.TB) string {
	t.Helper()
	return CodexACPIn(codexACP.get(t))
}

// CodexACPIn is the native binary inside an install directory (npm
// installs the one of this platform: codex-acp-linux-x64, -darwin-arm64 …).
func CodexACPIn(dir string) string {
	arch := runtime.GOARCH
	if arch == "amd64" {
		arch = "x64"
	}
	return filepath.Join(dir, "node_modules", "@zed-industries", "codex-acp-"+runtime.GOOS+"-"+arch, "bin", "codex-acp")
}

// EnsureCodexACP installs codex-acp when missing and returns its native
// binary (the benchmark's way; tests use CodexACP).
func EnsureCodexACP() (string, error) {
	dir, err := codexACP.ensure()
	if err != nil {
		return "", fmt.Errorf("%w\ninstall it with: %s", err, codexACP.installCommand())
	}
	return CodexACPIn(dir), nil
}

// Install is the body of the install command (`make test` runs it first):
// both packages, reported on stdout or stderr; it returns the exit code.
func Install(stdout, stderr io.Writer) int {
	code := 0
	for _, p := range []*pkg{sdk, codexACP} {
		dir, err := p.ensure()
		if err != nil {
			fmt.Fprintf(stderr, "install %s: %v\ninstall it by hand with: %s\n", p.spec, err, p.installCommand())
			code = 1
			continue
		}
		fmt.Fprintln(stdout, p.spec, "at", dir)
	}
	return code
}
