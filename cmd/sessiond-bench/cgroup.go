package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
)

// benchCgroup: cgroup mode against fallback mode in the same run, samples
// interleaved A B A B: hold-to-ready and close-to-tree-exited of an echo
// child (cooperative, and one with a SIGTERM-ignoring detached
// descendant), then the daemon's wakeups with N sessions held in each mode
// (the exit watch is inotify on cgroup.events: nothing may tick).
func benchCgroup(ctx context.Context, b *bench) ([]figure, error) {
	const ladder = "[ladder]\ngrace = \"100ms\"\nterm_timeout = \"200ms\"\nkill_timeout = \"2s\"\n"
	modes := []struct {
		name, cfg string
	}{{"cgroup", ladder}, {"fallback", fmt.Sprintf("cgroup_root = %q\n", b.dir("not-a-cgroup")) + ladder}}
	type side struct {
		d                 *daemon
		c                 *rpc.Client
		hold, close, orph []time.Duration
	}
	sides := make([]*side, len(modes))
	for i, m := range modes {
		d, err := b.startDaemon("", m.cfg)
		if err != nil {
			return nil, err
		}
		defer d.stop()
		c, err := d.client(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		var st struct {
			Supervision api.Supervision `json:"supervision"`
		}
		if err := c.Call(ctx, "daemon.status", nil, &st); err != nil {
			return nil, err
		}
		if st.Supervision.Mode != m.name {
			return nil, fmt.Errorf("cgroup: the %s daemon runs in %s mode: %s", m.name, st.Supervision.Mode, st.Supervision.Reason)
		}
		sides[i] = &side{d: d, c: c}
	}
	for i := 0; i < b.sz.cgroupSamples; i++ {
		for _, s := range sides {
			h, cl, err := holdClose(ctx, s.c, b.root, "")
			if err != nil {
				return nil, err
			}
			s.hold, s.close = append(s.hold, h), append(s.close, cl)
			_, cl, err = holdClose(ctx, s.c, b.root, "/orphan")
			if err != nil {
				return nil, err
			}
			s.orph = append(s.orph, cl)
		}
	}
	cg, fb := sides[0], sides[1]
	figs := []figure{
		ratioAtMost("cgroup.hold_ready_p50", ms(pct(cg.hold, 50)), ms(pct(fb.hold, 50)), "ms", 1.5),
		ratioAtMost("cgroup.close_tree_exited_p50", ms(pct(cg.close, 50)), ms(pct(fb.close, 50)), "ms", 1.5),
		info("cgroup.close_tree_exited_orphan_p50", ms(pct(cg.orph, 50)), "ms"),
		info("fallback.close_tree_exited_orphan_p50", ms(pct(fb.orph, 50)), "ms"),
	}
	wake, err := heldWakeups(ctx, b, sides[0].c, sides[0].d, sides[1].c, sides[1].d)
	if err != nil {
		return figs, err
	}
	n := b.sz.idleSessions
	figs = append(figs, atMost(fmt.Sprintf("cgroup.wakeups_%dheld", n), wake[0], "/s", wake[1]+0.2), // the issue: cgroup ≤ fallback + 0.2/s
		info(fmt.Sprintf("fallback.wakeups_%dheld", n), wake[1], "/s"))
	return figs, nil
}

// holdClose creates a session, holds it (timed: hold-to-ready), optionally
// sends text and waits for its turn, then closes it (timed: the reply comes
// once the stop step proved the tree gone).
func holdClose(ctx context.Context, c *rpc.Client, cwd, text string) (hold, cl time.Duration, err error) {
	var si api.SessionInfo
	if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: cwd}, &si); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: si.SessionID, HolderID: "b"}, nil); err != nil {
		return 0, 0, err
	}
	hold = time.Since(t0)
	if text != "" {
		if err := c.Call(ctx, "agentSession.send", api.SendParams{SessionID: si.SessionID, Text: text}, nil); err != nil {
			return 0, 0, err
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			if err := c.Call(ctx, "agentSession.get", api.SessionParams{SessionID: si.SessionID}, &si); err != nil {
				return 0, 0, err
			}
			if !si.TurnRunning {
				break
			}
			if time.Now().After(deadline) {
				return 0, 0, fmt.Errorf("turn of %s did not end", si.SessionID)
			}
			time.Sleep(5 * time.Millisecond) // outside the timed part
		}
	}
	t1 := time.Now()
	var cr api.CloseResult
	if err := c.Call(ctx, "agentSession.close", api.SessionParams{SessionID: si.SessionID}, &cr); err != nil {
		return 0, 0, err
	}
	cl = time.Since(t1)
	return hold, cl, nil
}

// heldWakeups holds idleSessions echo sessions in each daemon, then reads
// both daemons' context switches per second over the same idle window (so
// neither is measured in the other's after-start noise), then closes them.
func heldWakeups(ctx context.Context, b *bench, c0 *rpc.Client, d0 *daemon, c1 *rpc.Client, d1 *daemon) ([2]float64, error) {
	var out [2]float64
	cs, ds := []*rpc.Client{c0, c1}, []*daemon{d0, d1}
	ids := [2][]string{}
	for i, c := range cs {
		for range b.sz.idleSessions {
			var si api.SessionInfo
			if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: b.root}, &si); err != nil {
				return out, err
			}
			ids[i] = append(ids[i], si.SessionID)
		}
		if err := each(ids[i], func(id string) error {
			return c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "w"}, nil)
		}); err != nil {
			return out, err
		}
	}
	time.Sleep(time.Second) // let the starts settle before the window
	settleRuntime([]int{d0.pid(), d1.pid()}, b.sz.settleFor)
	var a [2]usage
	for i, d := range ds {
		u, err := readUsage(d.pid())
		if err != nil {
			return out, err
		}
		a[i] = u
	}
	t0 := time.Now()
	time.Sleep(b.sz.idleFor) // the idle window itself
	el := time.Since(t0).Seconds()
	for i, d := range ds {
		z, err := readUsage(d.pid())
		if err != nil {
			return out, err
		}
		out[i] = float64(z.switches-a[i].switches) / el
	}
	for i, c := range cs {
		if err := each(ids[i], func(id string) error {
			return c.Call(ctx, "agentSession.close", api.SessionParams{SessionID: id}, &api.CloseResult{})
		}); err != nil {
			return out, err
		}
	}
	return out, nil
}

// each runs f over ids from 8 goroutines; the first error wins.
func each(ids []string, f func(string) error) error {
	work := make(chan string)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if err := f(id); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%s: %w", id, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	return first
}
