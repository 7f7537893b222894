package acptest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// CodexModel is the model slug codex-acp is configured with: one codex
// knows (an unknown slug makes codex stream a "Model metadata … not
// found" warning as agent text), served by the mock provider.
const CodexModel = "gpt-5.4-mini"

// CodexHome writes a CODEX_HOME for codex-acp whose config sends every
// model request to modelURL (the codex test model server, offline) with
// the approval policy that makes an escalated command ask first.
func CodexHome(t testing.TB, modelURL string) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteCodexHome(dir, modelURL); err != nil {
		t.Fatalf("codex-acp home: %v", err)
	}
	return dir
}

// WriteCodexHome writes CodexHome's config.toml into dir.
func WriteCodexHome(dir, modelURL string) error {
	cfg := fmt.Sprintf(`model = %q
model_provider = "mock"
approval_policy = "on-request"
sandbox_mode = "read-only"

[model_providers.mock]
name = "mock"
base_url = %q
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, CodexModel, modelURL)
	return os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600)
}

// CodexACPTable is a [providers.NAME] table of the daemon's config running
// bin (the pinned codex-acp's native binary) over protocol acp under
// CODEX_HOME home; HOME is userHome, an empty directory (codex snapshots
// the user's login shell).
func CodexACPTable(name, bin, home, userHome string) string {
	return fmt.Sprintf("[providers.%s]\ncommand = [%q]\nprotocol = \"acp\"\nenv = { CODEX_HOME = %q, HOME = %q }\n",
		name, bin, home, userHome)
}
