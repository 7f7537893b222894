package main

import (
	"context"
	"fmt"

	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// benchCodex: daemon CPU per real codex turn against the codex process
// tree's own CPU for the same turns (from /proc, same run). Each turn runs
// a command the model asks for (an approval, answered at once), streams
// its output, then a text reply, against the scripted model server.
func benchCodex(ctx context.Context, b *bench) ([]figure, error) {
	bin, err := codextest.Ensure()
	if err != nil {
		return nil, fmt.Errorf("codex: %w (install with: %s)", err, codextest.InstallCommand())
	}
	m, err := codextest.StartModel()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	home := b.dir("codex-home")
	if err := codextest.WriteHome(home, m.URL, ""); err != nil {
		return nil, err
	}
	d, err := b.startDaemon("", "start_timeout = \"60s\"\n"+codextest.ProviderTable("codex", bin, home, b.dir("codex-user-home")))
	if err != nil {
		return nil, err
	}
	defer d.stop()
	return turnCPU(ctx, b, d, "codex", b.dir("codex-cwd"), "codex",
		// A warm-up turn: codex's first turn also snapshots the login shell.
		func() { m.Push(codextest.Exec("warm", "echo warm"), codextest.Text("ok")) },
		func(i int) {
			m.Push(codextest.Exec(fmt.Sprintf("c%d", i), "seq 200"), codextest.Text("the ", "numbers ", "are ", "printed"))
		})
}
