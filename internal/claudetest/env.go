package claudetest

import (
	"os"
	"path/filepath"
	"testing"
)

// Env is the environment of an offline CLI run against modelURL (the
// model server's base URL): HOME and CLAUDE_CONFIG_DIR in dir (an empty
// HOME: no user profile or settings leak in), the API key the scripted
// server ignores, and no traffic but the model's.
func Env(dir, modelURL string) map[string]string {
	return map[string]string{
		"HOME":               filepath.Join(dir, "home"),
		"CLAUDE_CONFIG_DIR":  filepath.Join(dir, "config"),
		"ANTHROPIC_BASE_URL": modelURL,
		"ANTHROPIC_API_KEY":  "test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
	}
}

// NewEnv is Env in a fresh temp dir of the test, its HOME and config dir
// created.
func NewEnv(t testing.TB, modelURL string) map[string]string {
	t.Helper()
	env := Env(t.TempDir(), modelURL)
	for _, k := range []string{"HOME", "CLAUDE_CONFIG_DIR"} {
		if err := os.MkdirAll(env[k], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

// Args is the command line of the built-in `claude` provider (PROTOCOL.md
// "Provider children"), without the executable.
var Args = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json",
	"--verbose", "--include-partial-messages", "--permission-prompt-tool", "stdio"}
