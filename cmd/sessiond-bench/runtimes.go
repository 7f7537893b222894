package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// benchRuntimes: the real codex with processes = "account" (one runtime
// serving every session as a thread) against processes = "session" (one
// process per session), in one run:
//   - provider-tree PSS per extra idle session, shared vs per-session;
//   - hold-to-ready into a warm runtime against a cold start (the holds of
//     the per-session run, each of which starts a process);
//   - N concurrent turns on one runtime against the wall time of one.
//
// Every model reply waits rtModelDelay first (a model's latency), so a
// turn is not all codex's own CPU.
func benchRuntimes(ctx context.Context, b *bench) ([]figure, error) {
	bin, err := codextest.Ensure()
	if err != nil {
		return nil, fmt.Errorf("codex: %w (install with: %s)", err, codextest.InstallCommand())
	}
	m, err := codextest.StartModel()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	delay := b.sz.rtModelDelay
	m.Route(func(codextest.Request) (codextest.Reply, bool) {
		gate := make(chan struct{})
		time.AfterFunc(delay, func() { close(gate) })
		return codextest.Reply{Deltas: []string{"the ", "answer ", "is ", "here"}, Stall: gate}, true
	})
	// Per-session: k sessions, each its own codex.
	per, err := runtimeRun(ctx, b, bin, m.URL, "session", b.sz.rtIdleSessions, 0)
	if err != nil {
		return nil, fmt.Errorf("processes=session: %w", err)
	}
	// Shared: 1 + rtTurns sessions on one runtime.
	sh, err := runtimeRun(ctx, b, bin, m.URL, "account", 1+b.sz.rtTurns, b.sz.rtTurns)
	if err != nil {
		return nil, fmt.Errorf("processes=account: %w", err)
	}
	if len(sh.pids) != 1 {
		return nil, fmt.Errorf("processes=account: sessions on %d pids, want one runtime", len(sh.pids))
	}
	cold := medianDur(per.holds)
	warm := medianDur(sh.holds[1:])
	return []figure{
		atMost("runtimes.pss_per_extra_idle_session_shared", sh.pssPerExtra/1024, "MiB", 3),
		info("runtimes.pss_per_extra_idle_session_per_session", per.pssPerExtra/1024, "MiB"),
		{Name: "runtimes.pss_per_extra_shared_vs_per_session", Value: sh.pssPerExtra / 1024, Unit: "MiB", Baseline: per.pssPerExtra / 1024},
		ratioAtMost("runtimes.hold_to_ready_warm", ms(warm), ms(cold), "ms", 0.1),
		info("runtimes.hold_to_ready_cold_runtime", ms(medianDur(sh.holds[:1])), "ms"),
		ratioAtMost(fmt.Sprintf("runtimes.turns_%dconcurrent_one_runtime", b.sz.rtTurns), ms(sh.concurrent), ms(sh.one), "ms", 3),
		info("runtimes.model_delay_per_reply", ms(delay), "ms"),
	}, nil
}

// runtimeResult is one mode's measurements.
type runtimeResult struct {
	holds           []time.Duration // hold call to answer, in hold order
	pssPerExtra     float64         // KiB of provider-tree PSS per session after the second
	pids            map[int]bool    // the sessions' provider pids
	one, concurrent time.Duration   // one turn alone; turns turns at once (turns > 0)
}

// runtimeRun starts a daemon whose codex profile has processes = mode,
// holds n sessions (timing each hold and measuring the provider tree's
// PSS after the second and the last: the first hold's process still
// runs start-up work of its own), then, with turns > 0, runs one turn
// on the first session alone and one on each of the next turns sessions
// at once (each a first turn of its thread, like the lone one).
func runtimeRun(ctx context.Context, b *bench, bin, modelURL, mode string, n, turns int) (runtimeResult, error) {
	var res runtimeResult
	home := b.dir("rt-home-" + mode)
	if err := codextest.WriteHome(home, modelURL, ""); err != nil {
		return res, err
	}
	cfg := "start_timeout = \"60s\"\nidle_timeout = \"10m\"\n" +
		codextest.ProviderTable("codex", bin, home, b.dir("rt-user-"+mode)) + fmt.Sprintf("processes = %q\n", mode)
	d, err := b.startDaemon("", cfg)
	if err != nil {
		return res, err
	}
	defer d.stop()
	w := &turnWaiter{done: map[string]chan struct{}{}}
	c, err := d.client(ctx, w.on)
	if err != nil {
		return res, err
	}
	defer c.Close()
	cwd := b.dir("rt-cwd-" + mode)
	ids := make([]string, n)
	res.pids = map[int]bool{}
	var pss1 float64
	for i := range ids {
		var si api.SessionInfo
		if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "codex", Cwd: cwd}, &si); err != nil {
			return res, err
		}
		ids[i] = si.SessionID
		if err := c.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: si.SessionID, Limit: 1}, nil); err != nil {
			return res, err
		}
		t0 := time.Now()
		var h api.HoldResult
		if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: si.SessionID, HolderID: "bench"}, &h); err != nil {
			return res, fmt.Errorf("hold %d: %w", i, err)
		}
		res.holds = append(res.holds, time.Since(t0))
		res.pids[h.PID] = true
		if i == 1 {
			if pss1, err = settledPSS(d.pid()); err != nil {
				return res, err
			}
		}
	}
	pssN, err := settledPSS(d.pid())
	if err != nil {
		return res, err
	}
	if n > 2 {
		res.pssPerExtra = (pssN - pss1) / float64(n-2)
	}
	if turns == 0 {
		return res, nil
	}
	if res.one, err = w.turns(ctx, c, ids[:1]); err != nil {
		return res, fmt.Errorf("one turn: %w", err)
	}
	if res.concurrent, err = w.turns(ctx, c, ids[1:1+turns]); err != nil {
		return res, fmt.Errorf("%d concurrent turns: %w", turns, err)
	}
	return res, nil
}

// turnWaiter closes a session's channel at its turn.completed.
type turnWaiter struct {
	mu   sync.Mutex
	done map[string]chan struct{}
}

func (w *turnWaiter) on(method string, p []byte) {
	var n api.EventNotice
	if method != rpc.NotifyEvent || json.Unmarshal(p, &n) != nil || n.Event.Type != event.TurnCompleted {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch := w.done[n.Event.SessionID]; ch != nil {
		close(ch)
		delete(w.done, n.Event.SessionID)
	}
}

// turns sends one turn on each of ids at once and returns the wall time
// until the last turn.completed.
func (w *turnWaiter) turns(ctx context.Context, c *rpc.Client, ids []string) (time.Duration, error) {
	chs := make([]chan struct{}, len(ids))
	w.mu.Lock()
	for i, id := range ids {
		chs[i] = make(chan struct{})
		w.done[id] = chs[i]
	}
	w.mu.Unlock()
	t0 := time.Now()
	errs := make(chan error, len(ids))
	for _, id := range ids {
		go func() {
			errs <- c.Call(ctx, "agentSession.send", api.SendParams{SessionID: id, Text: "answer me"}, nil)
		}()
	}
	for range ids {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	timeout := time.After(5 * time.Minute)
	for i, ch := range chs {
		select {
		case <-ch:
		case <-timeout:
			return 0, fmt.Errorf("session %s: no turn.completed within 5 min", ids[i])
		}
	}
	return time.Since(t0), nil
}

// settledPSS is treePSS after a second's pause: what a hold's start-up
// left running (codex's login-shell snapshot) ends first.
func settledPSS(root int) (float64, error) {
	time.Sleep(time.Second)
	return treePSS(root)
}

// treePSS sums the PSS (KiB, /proc/PID/smaps_rollup) of root's
// descendants: the provider processes of a daemon.
func treePSS(root int) (float64, error) {
	var sum float64
	for _, pid := range descendants(root) {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
		if err != nil {
			continue // gone meanwhile
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				if err != nil {
					f.Close()
					return 0, fmt.Errorf("pid %d smaps_rollup: %w", pid, err)
				}
				sum += kb
				break
			}
		}
		f.Close()
	}
	return sum, nil
}

// descendants are the live descendants of root (not root itself).
func descendants(root int) []int {
	parent := map[int]int{}
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
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for pid := range parent {
		for p := parent[pid]; p != 0 && p != pid; p = parent[p] {
			if p == root {
				out = append(out, pid)
				break
			}
			if _, ok := parent[p]; !ok {
				break
			}
		}
	}
	return out
}

// medianDur of ds (0 for none).
func medianDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
