package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ECtlCreateUnknownProvider: `ctl create --provider codex` on a
// daemon whose PATH has no codex names the known providers and the fix
// (install it, put it on the daemon's PATH, or add a [providers.codex]
// table, then restart); claude's names its npm package; a name that is
// not built in names the table to add.
func TestE2ECtlCreateUnknownProvider(t *testing.T) {
	for _, p := range []string{"/usr/bin/codex", "/bin/codex", "/usr/bin/claude", "/bin/claude"} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s exists: this test needs a PATH without codex and claude", p)
		}
	}
	d := daemontest.Start(t, daemontest.Options{Env: []string{"PATH=/usr/bin:/bin"}})
	dir := t.TempDir()
	tests := []struct {
		provider string
		want     []string
	}{
		{"codex", []string{`unknown provider "codex" (known: echo)`, "`codex` is on the daemon's PATH",
			"install it (npm install -g @openai/codex) or put it on that PATH", "[providers.codex] table", "restart the daemon", "[unknown_provider]"}},
		{"claude", []string{`unknown provider "claude" (known: echo)`, "npm install -g @anthropic-ai/claude-code", "[providers.claude] table"}},
		{"nope", []string{`unknown provider "nope" (known: echo)`, "add a [providers.nope] table (command, protocol", "restart the daemon"}},
		{"a.b", []string{`add a [providers."a.b"] table (command, protocol`}},
		{strings.Repeat("p", 40), []string{"the name is 40 bytes, too long to repeat here"}},
	}
	for _, tc := range tests {
		code, out, errOut := runCtl(t, d.Socket, dir, "create", "--provider", tc.provider, "--cwd", dir)
		if code != exitcode.Error {
			t.Errorf("create --provider %s: exit %d %q %q", tc.provider, code, out, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("create --provider %s: %q does not say %q", tc.provider, errOut, w)
			}
		}
	}
}
