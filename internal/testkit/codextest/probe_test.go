package codextest_test

import (
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// cancel while a command approval is open: the approval is closed before
// the turn ends interrupted (user_cancel), the command never ran, and the
// session takes the next turn.
func TestCodexCancelAtApproval(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	m := codextest.NewModel(t, codextest.Exec("call_1", "touch "+marker), codextest.Text("after"))
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
	s := providertest.NewSession(t, d, client, "codex", dir)
	providertest.CancelAtApproval(t, d, s, "codex", marker, "after")
}

// close while an approved command runs: the turn ends interrupted
// (closed), the command's item is never completed as if it succeeded,
// and nothing of the tree is left.
func TestCodexCloseDuringCommand(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	m := codextest.NewModel(t, codextest.Exec("call_1", "touch "+started+" && sleep 300"), codextest.Text("never"))
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.Home(t, m.URL, "")))
	s := providertest.NewSession(t, d, client, "codex", dir)
	providertest.CloseDuringCommand(t, d, s, "codex", started)
}
