package claudetest_test

import (
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// cancel while a Bash approval is open: the approval is closed before the
// turn ends interrupted (user_cancel), the command never ran, and the
// session takes the next turn.
func TestClaudeCancelAtApproval(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", "touch "+marker), claudetest.Text("after"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", dir)
	providertest.CancelAtApproval(t, d, s, "claude", marker, "after")
}

// close while an approved command runs: the turn ends interrupted
// (closed), the command's shell is gone with the CLI, nothing is left.
func TestClaudeCloseDuringCommand(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", "touch "+started+" && sleep 300"), claudetest.Text("never"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", dir)
	providertest.CloseDuringCommand(t, d, s, "claude", started)
}
