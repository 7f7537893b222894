package claudetest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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

// MakeEnv is Env with its HOME and config dir created.
func MakeEnv(dir, modelURL string) (map[string]string, error) {
	env := Env(dir, modelURL)
	for _, k := range []string{"HOME", "CLAUDE_CONFIG_DIR"} {
		if err := os.MkdirAll(env[k], 0o700); err != nil {
			return nil, fmt.Errorf("claude env: %w", err)
		}
	}
	return env, nil
}

// NewEnv is MakeEnv in a fresh temp dir of the test.
func NewEnv(t testing.TB, modelURL string) map[string]string {
	t.Helper()
	env, err := MakeEnv(t.TempDir(), modelURL)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// Args is the command line of the built-in `claude` provider (PROTOCOL.md
// "Provider children"), without the executable.
var Args = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json",
	"--verbose", "--include-partial-messages", "--permission-prompt-tool", "stdio"}

// ProviderTable is a [providers.NAME] table of the daemon's config
// running bin (the pinned claude) with Args and env.
func ProviderTable(name, bin string, env map[string]string) string {
	cmd := []string{strconv.Quote(bin)}
	for _, a := range Args {
		cmd = append(cmd, strconv.Quote(a))
	}
	var kv []string
	for k, v := range env {
		kv = append(kv, fmt.Sprintf("%s = %q", k, v))
	}
	sort.Strings(kv)
	return fmt.Sprintf("[providers.%s]\ncommand = [%s]\nprotocol = \"claude-stream-json\"\nenv = { %s }\n",
		name, strings.Join(cmd, ", "), strings.Join(kv, ", "))
}
