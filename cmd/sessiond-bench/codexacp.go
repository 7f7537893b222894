package main

import (
	"context"
	"fmt"

	"github.com/sessiond/sessiond/internal/testkit/acptest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// benchCodexACP: daemon CPU per real codex-acp turn (protocol acp) against
// the agent process tree's own CPU for the same turns (from /proc, same
// run): the codex turn of benchCodex (a command the model asks for, its
// permission answered at once, then a text reply) through ACP.
func benchCodexACP(ctx context.Context, b *bench) ([]figure, error) {
	bin, err := acptest.EnsureCodexACP()
	if err != nil {
		return nil, fmt.Errorf("codex-acp: %w", err)
	}
	m, err := codextest.StartModel()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	home := b.dir("codex-acp-home")
	if err := acptest.WriteCodexHome(home, m.URL); err != nil {
		return nil, err
	}
	d, err := b.startDaemon("", "start_timeout = \"60s\"\n"+acptest.CodexACPTable("codex-acp", bin, home, b.dir("codex-acp-user-home")))
	if err != nil {
		return nil, err
	}
	defer d.stop()
	return turnCPU(ctx, b, d, "codex-acp", b.dir("codex-acp-cwd"), "agent",
		func() { m.Push(codextest.Exec("warm", "echo warm"), codextest.Text("ok")) },
		func(i int) {
			m.Push(codextest.Exec(fmt.Sprintf("c%d", i), "seq 200"), codextest.Text("the ", "numbers ", "are ", "printed"))
		})
}
