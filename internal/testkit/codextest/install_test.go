package codextest

import (
	"strings"
	"testing"
)

// TestMissingNpmFails: without npm and with an empty cache, installing
// fails with a reason (Binary turns it into a failing test naming the
// install command), never a silent skip.
func TestMissingNpmFails(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	_, err := ensure()
	if err == nil || !strings.Contains(err.Error(), "npm not on PATH") {
		t.Fatalf("ensure without npm: %v", err)
	}
	if cmd := InstallCommand(); !strings.Contains(cmd, "npm install") || !strings.Contains(cmd, Package) {
		t.Fatalf("install command %q", cmd)
	}
}
