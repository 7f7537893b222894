package codextest_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/provider/codex"
	"github.com/sessiond/sessiond/internal/testkit/clitest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// adapterProc is the real codex app-server under one CODEX_HOME driven by
// the codex adapter directly (no daemon): what an account's process does
// with a thread carried into its home.
type adapterProc struct {
	*clitest.Proc
	res provider.StartResult
}

// startAdapter spawns codex under home (HOME an empty dir), in cwd, and
// starts the adapter: a fresh thread, or a resume of threadID.
func startAdapter(t *testing.T, home, cwd, threadID string) (*adapterProc, error) {
	t.Helper()
	cmd := exec.Command(codextest.Binary(t), "app-server")
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "HOME="+t.TempDir())
	cmd.Dir = cwd
	p, res, err := clitest.StartAdapter(providertest.Ctx(t), t, cmd, codex.New, provider.Options{Cwd: cwd, ThreadID: threadID})
	return &adapterProc{Proc: p, res: res}, err
}

// envOf is an account's environment as a Move reads it.
func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}
