package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// turnCPU: daemon CPU per turn of a real provider's session against the
// CPU of the provider's process tree for the same turns (from /proc, same
// run). The session runs in cwd on d; a warm-up turn comes first (warm
// scripts its model replies: a first turn does one-off work, codex
// snapshots the login shell), then b.sz.codexTurns turns, each after
// turn(i) scripted its replies. The figures are <provider>.daemon_cpu_per_turn
// (at most a tenth of the tree's) and <provider>.<cliFigure>_cpu_per_turn.
func turnCPU(ctx context.Context, b *bench, d *daemon, provider, cwd, cliFigure string, warm func(), turn func(i int)) ([]figure, error) {
	t, err := newTurnDriver(ctx, d, provider, cwd)
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
	warm()
	if _, _, err := t.run(ctx, "warm up"); err != nil {
		return nil, fmt.Errorf("%s warm-up: %w", provider, err)
	}
	d0, err := readUsage(d.pid())
	if err != nil {
		return nil, err
	}
	c0 := treeTicks(sess.PID)
	for i := range b.sz.codexTurns {
		turn(i)
		if _, _, err := t.run(ctx, "print some numbers"); err != nil {
			return nil, fmt.Errorf("%s turn %d: %w", provider, i, err)
		}
	}
	d1, err := readUsage(d.pid())
	if err != nil {
		return nil, err
	}
	c1 := treeTicks(sess.PID)
	turns := float64(b.sz.codexTurns)
	daemonMs := float64(d1.cpuTicks-d0.cpuTicks) * 1000 / clkTck / turns
	cliMs := float64(c1-c0) * 1000 / clkTck / turns
	return []figure{
		ratioAtMost(provider+".daemon_cpu_per_turn", daemonMs, cliMs, "ms", 0.1),
		info(provider+"."+cliFigure+"_cpu_per_turn", cliMs, "ms"),
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
