package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest/daemoncore"
)

// benchClaude: two figures of the real Claude Code CLI against the
// scripted Messages API, in one run. (1) Daemon CPU per turn against the
// CLI's own CPU for the same turns (from /proc): each turn runs a Bash
// command the model asks for (an approval, answered at once), then a text
// reply. (2) Start-to-ready of a held session: the hold's latency minus
// the CLI's own time from spawn to ready (its answer to the initialize
// control request, the point the adapter waits for; Claude writes its
// system/init only with the first turn) in that same hold, as the daemon
// logs it; the median over the holds. The CLI's own start varies by tens
// of ms run to run on a loaded machine, so the difference of two separate
// runs could not resolve 10 ms; for scale the CLI is also started directly
// (same command line and environment), interleaved with the holds.
func benchClaude(ctx context.Context, b *bench) ([]figure, error) {
	bin, err := claudetest.Ensure()
	if err != nil {
		return nil, fmt.Errorf("claude: %w (install with: %s)", err, claudetest.InstallCommand())
	}
	m, err := claudetest.StartModel()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	env, err := claudetest.MakeEnv(b.dir("claude-account"), m.URL)
	if err != nil {
		return nil, err
	}
	d, err := b.startDaemon("", "start_timeout = \"60s\"\n"+claudetest.ProviderTable("claude", bin, env))
	if err != nil {
		return nil, err
	}
	defer d.stop()

	cpu, err := turnCPU(ctx, b, d, "claude", b.dir("claude-cwd"), "cli",
		func() { m.Push(claudetest.Bash("warm", "touch warm && echo warm"), claudetest.Text("ok")) },
		func(i int) {
			m.Push(claudetest.Bash(fmt.Sprintf("toolu_%d", i), "touch f && seq 200"), claudetest.Text("the ", "numbers ", "are ", "printed"))
		})
	if err != nil {
		return cpu, err
	}
	start, err := claudeStartOverhead(ctx, b, d, bin, env)
	return append(cpu, start...), err
}

func claudeStartOverhead(ctx context.Context, b *bench, d *daemon, bin string, env map[string]string) ([]figure, error) {
	c, err := d.client(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	runs := max(1, b.sz.codexTurns*3)
	var held, direct, overhead []float64
	for i := range runs {
		var si api.SessionInfo
		if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "claude", Cwd: b.dir("claude-start")}, &si); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: si.SessionID, HolderID: "bench"}, nil); err != nil {
			return nil, fmt.Errorf("claude hold %d: %w", i, err)
		}
		hold := float64(time.Since(t0).Microseconds()) / 1000
		held = append(held, hold)
		ready, err := readyMs(d.logPath, si.SessionID)
		if err != nil {
			return nil, err
		}
		overhead = append(overhead, hold-ready)
		if err := c.Call(ctx, "agentSession.close", api.SessionParams{SessionID: si.SessionID}, nil); err != nil {
			return nil, err
		}
		ms, err := directStart(ctx, bin, env, b.dir("claude-direct"))
		if err != nil {
			return nil, err
		}
		direct = append(direct, ms)
	}
	return []figure{
		atMost("claude.start_overhead", median(overhead), "ms", 10),
		info("claude.start_overhead_min", slices.Min(overhead), "ms"),
		info("claude.cli_start_to_ready", median(direct), "ms"),
		info("claude.hold_start_to_ready", median(held), "ms"),
	}, nil
}

// readyMs is the CLI's own spawn-to-ready time in one hold, as the daemon
// logged it (provider started, ready_us).
func readyMs(logPath, sessionID string) (float64, error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return 0, err
	}
	var ready float64 = -1
	for _, line := range strings.Split(string(b), "\n") {
		var l struct {
			Msg       string  `json:"msg"`
			SessionID string  `json:"session_id"`
			ReadyUs   float64 `json:"ready_us"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "provider started" && l.SessionID == sessionID {
			ready = l.ReadyUs / 1000
		}
	}
	if ready < 0 {
		return 0, fmt.Errorf("no provider started line of session %s in the daemon log", sessionID)
	}
	return ready, nil
}

// directStart runs the CLI as the daemon would and times spawn → its
// answer to the initialize control request; then closes its stdin.
func directStart(ctx context.Context, bin string, env map[string]string, cwd string) (float64, error) {
	cmd := exec.CommandContext(ctx, bin, claudetest.Args...)
	cmd.Dir = cwd
	// As the daemon spawns it: its environment, stderr captured, a
	// process group of its own.
	cmd.Env = daemoncore.CleanEnv()
	cmd.Stderr = io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = in.Close(); _ = cmd.Wait() }()
	if _, err := in.Write([]byte(`{"type":"control_request","request_id":"r1","request":{"subtype":"initialize"}}` + "\n")); err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var l struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Type == "control_response" {
			return float64(time.Since(t0).Microseconds()) / 1000, nil
		}
	}
	return 0, fmt.Errorf("claude started directly: no answer to initialize")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
