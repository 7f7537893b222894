package daemontest

import (
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/daemontest/daemoncore"
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
	build.once.Do(func() { build.path, build.err = buildBinary("") })
	if build.err != nil {
		t.Fatalf("build sessiond: %v", build.err)
	}
	return build.path
}

var versioned struct {
	sync.Mutex
	paths map[string]string
}

// BinaryVersion builds ./cmd/sessiond with its version string set to
// version (-ldflags -X github.com/sessiond/sessiond/internal/version.buildVersion),
// once per version and test process: a second build for live-upgrade tests.
func BinaryVersion(t testing.TB, version string) string {
	t.Helper()
	versioned.Lock()
	defer versioned.Unlock()
	if p, ok := versioned.paths[version]; ok {
		return p
	}
	p, err := buildBinary(version)
	if err != nil {
		t.Fatalf("build sessiond %s: %v", version, err)
	}
	if versioned.paths == nil {
		versioned.paths = map[string]string{}
	}
	versioned.paths[version] = p
	return p
}

func buildBinary(version string) (string, error) {
	root, err := daemoncore.ModuleRoot()
	if err != nil {
		return "", err
	}
	// One directory per checkout: two checkouts on one machine must never
	// run each other's daemon.
	h := fnv.New32a()
	h.Write([]byte(root))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("sessiond-daemontest-%d-%08x", os.Getuid(), h.Sum32()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := "sessiond"
	if raceEnabled {
		name += "-race"
	}
	if version != "" {
		name += "-v" + strings.Map(func(r rune) rune {
			if r == '/' || r == ' ' {
				return '_'
			}
			return r
		}, version)
	}
	out := filepath.Join(dir, name)
	// Build to a private name, then rename: test processes of several
	// packages may build at once.
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	if err := daemoncore.Build(tmp.Name(), raceEnabled, version); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}

// ReportedVersion is the version bin reports (`sessiond version`): tests
// compare with it, never with a literal, since a build from a git clone
// carries its commit (VCS stamping) and one without it says "dev".
func ReportedVersion(t testing.TB, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "sessiond ")
	if !ok || v == "" || strings.ContainsAny(v, " \n") {
		t.Fatalf("%s version: %q, want \"sessiond VERSION\"", bin, out)
	}
	return v
}
