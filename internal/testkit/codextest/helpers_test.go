package codextest_test

import (
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// client names the tests' clients of the daemon.
const client = "codex-e2e"

// providerConfig is a [providers.NAME] table running the pinned codex
// under home, its HOME an empty directory of the test, one process per
// session (processes = "session": these tests prove that mode's process
// guarantees; sharedProviderConfig is the built-in default, "account").
func providerConfig(t *testing.T, name, home string) string {
	return codextest.ProviderTable(name, codextest.Binary(t), home, t.TempDir()) + "processes = \"session\"\n"
}

// sharedProviderConfig is providerConfig with processes = "account".
func sharedProviderConfig(t *testing.T, name, home string) string {
	return codextest.ProviderTable(name, codextest.Binary(t), home, t.TempDir()) + "processes = \"account\"\n"
}
