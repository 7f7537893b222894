package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// benchCodexIdle: what an idle real-codex session costs in per-session
// mode (one codex process tree per held session, no turn yet), as PSS
// (smaps_rollup: shared pages divided between the processes mapping them)
// summed over the provider trees, 1 session held, then N. The figures are
// the baseline the shared runtime's (one process, N threads) is compared
// against in the same run: codex-idle.pss_per_session_Nheld (sum / N),
// codex-idle.pss_per_extra_session ((sum at N - sum at 1) / (N-1)), and the
// RSS sum / N beside them (RSS counts the shared binary once per process).
func benchCodexIdle(ctx context.Context, b *bench) ([]figure, error) {
	bin, err := codextest.Ensure()
	if err != nil {
		return nil, fmt.Errorf("codex: %w (install with: %s)", err, codextest.InstallCommand())
	}
	m, err := codextest.StartModel()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	home := b.dir("codex-idle-home")
	if err := codextest.WriteHome(home, m.URL, ""); err != nil {
		return nil, err
	}
	d, err := b.startDaemon("", "start_timeout = \"60s\"\n"+codextest.ProviderTable("codex", bin, home, b.dir("codex-idle-user-home")))
	if err != nil {
		return nil, err
	}
	defer d.stop()
	c, err := d.client(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	n := max(b.sz.codexIdle, 2)
	cwd := b.dir("codex-idle-cwd")
	var roots []int
	hold := func() error {
		var si api.SessionInfo
		if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "codex", Cwd: cwd}, &si); err != nil {
			return err
		}
		var h api.HoldResult
		if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: si.SessionID, HolderID: "codex-idle"}, &h); err != nil {
			return fmt.Errorf("hold %s: %w", si.SessionID, err)
		}
		if h.PID == 0 {
			return fmt.Errorf("hold %s: no provider pid", si.SessionID)
		}
		roots = append(roots, h.PID)
		return nil
	}
	// measure sums PSS and RSS over every held session's tree once the
	// processes have settled (codex finishes its start-up work after
	// answering the thread's start).
	measure := func() (pss, rss int64, procs int, err error) {
		time.Sleep(2 * time.Second)
		for _, root := range roots {
			p, k, err := proc.TreePSS(root)
			if err != nil {
				return 0, 0, 0, err
			}
			pss += p
			procs += k
			rss += treeRSS(root)
		}
		return pss, rss, procs, nil
	}
	if err := hold(); err != nil {
		return nil, err
	}
	pss1, rss1, procs1, err := measure()
	if err != nil {
		return nil, err
	}
	for len(roots) < n {
		if err := hold(); err != nil {
			return nil, err
		}
	}
	pssN, rssN, procsN, err := measure()
	if err != nil {
		return nil, err
	}
	const mib = 1 << 20
	fmt.Fprintf(b.log, "sessiond-bench: codex-idle: 1 held: PSS %.1f MiB, RSS %.1f MiB over %d processes; %d held: PSS %.1f MiB, RSS %.1f MiB over %d processes\n",
		float64(pss1)/mib, float64(rss1)/mib, procs1, n, float64(pssN)/mib, float64(rssN)/mib, procsN)
	return []figure{
		info(fmt.Sprintf("codex-idle.pss_per_session_%dheld", n), float64(pssN)/float64(n)/mib, "MiB"),
		info("codex-idle.pss_per_extra_session", float64(pssN-pss1)/float64(n-1)/mib, "MiB"),
		info(fmt.Sprintf("codex-idle.rss_per_session_%dheld", n), float64(rssN)/float64(n)/mib, "MiB"),
	}, nil
}

// treeRSS is the VmRSS summed over root and its live descendants, in bytes.
func treeRSS(root int) int64 {
	kids := map[int][]int{}
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
		if f := strings.Fields(s[i+1:]); i >= 0 && len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			kids[pp] = append(kids[pp], pid)
		}
	}
	var kib uint64
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		kib += statusFields(fmt.Sprintf("/proc/%d/status", queue[0]))["VmRSS"]
		queue = append(queue, kids[queue[0]]...)
	}
	return int64(kib) << 10
}
