package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/internal/codextest"
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
	cfg := fmt.Sprintf("start_timeout = \"60s\"\n[providers.codex]\ncommand = [%q, \"app-server\"]\nprotocol = \"codex-app-server\"\nenv = { CODEX_HOME = %q, HOME = %q }\n", bin, home, b.dir("codex-user-home"))
	d, err := b.startDaemon("", cfg)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	t, err := newTurnDriver(ctx, d, "codex", b.dir("codex-cwd"))
	if err != nil {
		return nil, err
	}
	defer t.c.Close()
	var sess struct {
		PID int `json:"pid"`
	}
	if err := t.c.Call(ctx, "agentSession.get", map[string]string{"sessionId": t.id}, &sess); err != nil {
		return nil, err
	}
	// A warm-up turn: codex's first turn also snapshots the login shell.
	m.Push(codextest.Exec("warm", "echo warm"), codextest.Text("ok"))
	if _, _, err := t.run(ctx, "warm up"); err != nil {
		return nil, fmt.Errorf("codex warm-up: %w", err)
	}
	d0, err := readUsage(d.pid())
	if err != nil {
		return nil, err
	}
	c0 := treeTicks(sess.PID)
	for i := range b.sz.codexTurns {
		m.Push(codextest.Exec(fmt.Sprintf("c%d", i), "seq 200"), codextest.Text("the ", "numbers ", "are ", "printed"))
		if _, _, err := t.run(ctx, "print some numbers"); err != nil {
			return nil, fmt.Errorf("codex turn %d: %w", i, err)
		}
	}
	d1, err := readUsage(d.pid())
	if err != nil {
		return nil, err
	}
	c1 := treeTicks(sess.PID)
	turns := float64(b.sz.codexTurns)
	daemonMs := float64(d1.cpuTicks-d0.cpuTicks) * 1000 / clkTck / turns
	codexMs := float64(c1-c0) * 1000 / clkTck / turns
	return []figure{
		ratioAtMost("codex.daemon_cpu_per_turn", daemonMs, codexMs, "ms", 0.1),
		info("codex.codex_cpu_per_turn", codexMs, "ms"),
	}, nil
}

// treeTicks is the CPU (utime+stime, plus that of waited-for children) of
// root and every live descendant.
func treeTicks(root int) uint64 {
	parent := map[int]int{}
	ticks := map[int]uint64{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // f[0] is field 3
		if len(f) < 15 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		var sum uint64
		for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseUint(f[k], 10, 64)
			sum += v
		}
		parent[pid], ticks[pid] = pp, sum
	}
	var total uint64
	for pid := range ticks {
		for p := pid; p != 0; p = parent[p] {
			if p == root {
				total += ticks[pid]
				break
			}
			if _, ok := parent[p]; !ok {
				break
			}
		}
	}
	return total
}
