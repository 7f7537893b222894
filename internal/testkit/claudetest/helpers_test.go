package claudetest_test

import (
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// client names the tests' clients of the daemon.
const client = "claude-e2e"

// providerConfig is a [providers.NAME] table running the pinned claude
// with env (claudetest.NewEnv).
func providerConfig(t *testing.T, name string, env map[string]string) string {
	return claudetest.ProviderTable(name, claudetest.Binary(t), env)
}
