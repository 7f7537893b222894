package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The echo baseline is this binary re-executed (see echo.go).
	if len(os.Args) > 2 && os.Args[1] == echoServerFlag {
		os.Exit(echoServerMain(os.Args[2]))
	}
	goleak.VerifyTestMain(m)
}

// TestSmoke runs every figure at tiny sizes against the real daemon: each
// prints its line, nothing fails, and no process is left behind (every
// daemon, echo child and baseline server inherits TMPDIR, a dir unique to
// this test).
func TestSmoke(t *testing.T) {
	tmp, err := os.MkdirTemp("", "sdsmoke")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	var out, errs bytes.Buffer
	if code := run([]string{"--smoke"}, &out, &errs); code != 0 {
		t.Fatalf("sessiond-bench --smoke exited %d:\n%s\n%s", code, out.String(), errs.String())
	}
	for _, want := range []string{"rpc.status.p50_1client", "rpc.status.throughput_", "rpc.hold_release_pair.p99_1client",
		"events.provider_deltas_per_s", "events.latency_p99", "idle.cpu_", "idle.wakeups_", "idle.rss_per_held_session",
		"probe.sweep100_cold", "probe.per_identity_vs_ps_spawn", "replay.events_per_s", "startup.", "evict.cooperative_p50",
		"evict.sigterm_ignoring_p50", "items.output_deltas_per_s", "items.reasoning_deltas_per_s", "codex.daemon_cpu_per_turn", "runtimes.pss_per_extra_idle_session_shared", "runtimes.hold_to_ready_warm", "runtimes.turns_", "codex-acp.daemon_cpu_per_turn",
		"claude.daemon_cpu_per_turn", "claude.start_overhead", "upgrade.3sessions_to_accepting_p50", "upgrade.longest_event_gap_"} {
		if !strings.Contains(out.String(), "bench: "+want) {
			t.Errorf("no figure %q in:\n%s", want, out.String())
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "bench: ") && !strings.HasSuffix(line, " ok") && !strings.HasSuffix(line, " MISS") &&
			!strings.HasSuffix(line, " info") {
			t.Errorf("malformed figure line %q", line)
		}
	}
	if left := processesMentioning(tmp); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// processesMentioning lists pids whose environment contains s.
func processesMentioning(s string) []string {
	envs, _ := filepath.Glob("/proc/[0-9]*/environ")
	var pids []string
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/"
	for _, e := range envs {
		if strings.HasPrefix(e, self) {
			continue
		}
		b, err := os.ReadFile(e)
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, filepath.Base(filepath.Dir(e)))
		}
	}
	return pids
}
