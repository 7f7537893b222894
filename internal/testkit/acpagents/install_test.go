package acpagents_test

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/acpagents"
)

// TestMissingAgentFails: with an empty cache and no npm, every agent's
// install fails with a reason and names the command that installs its
// exact pin, never a silent skip (Binary turns it into a failing test).
func TestMissingAgentFails(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	for _, a := range acpagents.All {
		t.Run(a.Name, func(t *testing.T) {
			var out, errb strings.Builder
			if code := a.Install(&out, &errb); code == 0 || !strings.Contains(errb.String(), "npm not on PATH") {
				t.Fatalf("install without npm: exit %d, %q", code, errb.String())
			}
			if !strings.Contains(errb.String(), a.InstallCommand()) || !strings.Contains(a.InstallCommand(), "npm install") ||
				!strings.HasSuffix(a.InstallCommand(), " "+a.Spec()) {
				t.Fatalf("install command %q, stderr %q", a.InstallCommand(), errb.String())
			}
		})
	}
}
