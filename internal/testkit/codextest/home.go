package codextest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Home writes a CODEX_HOME whose config sends every model request to
// modelURL (offline), with the approval policy that makes an escalated
// command ask first, and returns its path. extra is appended to config.toml
// (e.g. an [mcp_servers.x] table).
func Home(t testing.TB, modelURL, extra string) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteHome(dir, modelURL, extra); err != nil {
		t.Fatalf("codex home: %v", err)
	}
	return dir
}

// HomeRetrying is Home with codex retrying a failed model request and a
// dropped stream once.
func HomeRetrying(t testing.TB, modelURL string) string {
	t.Helper()
	dir := Home(t, modelURL, "")
	p := filepath.Join(dir, "config.toml")
	b, err := os.ReadFile(p)
	if err == nil {
		err = os.WriteFile(p, []byte(strings.NewReplacer("request_max_retries = 0", "request_max_retries = 1",
			"stream_max_retries = 0", "stream_max_retries = 1").Replace(string(b))), 0o600)
	}
	if err != nil {
		t.Fatalf("codex home: %v", err)
	}
	return dir
}

// WriteHome writes Home's config.toml into dir.
func WriteHome(dir, modelURL, extra string) error {
	cfg := fmt.Sprintf(`model = "mock-model"
model_provider = "mock"
approval_policy = "on-request"
sandbox_mode = "read-only"

[model_providers.mock]
name = "mock"
base_url = %q
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
%s`, modelURL, extra)
	return os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600)
}

// ProviderTable is a [providers.NAME] table of the daemon's config
// running bin (the pinned codex) as `app-server` under CODEX_HOME home.
// HOME is userHome, an empty directory: codex snapshots the user's login
// shell, and a real profile (pyenv, nvm …) would run its own slow
// processes.
func ProviderTable(name, bin, home, userHome string) string {
	return fmt.Sprintf("[providers.%s]\ncommand = [%q, \"app-server\"]\nprotocol = \"codex-app-server\"\nenv = { CODEX_HOME = %q, HOME = %q }\n",
		name, bin, home, userHome)
}
