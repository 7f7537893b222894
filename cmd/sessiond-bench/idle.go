package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// benchIdle: N sessions held with idle echo children; the daemon's CPU time,
// context switches (wakeups) and RSS over a quiet window, and RSS at 0 held
// against N held.
func benchIdle(ctx context.Context, b *bench) ([]figure, error) {
	d, err := b.startDaemon("", "")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	c, err := d.client(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	n := b.sz.idleSessions
	ids := make([]string, n)
	for i := range ids {
		var si api.SessionInfo
		if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: b.root}, &si); err != nil {
			return nil, err
		}
		ids[i] = si.SessionID
	}
	u0, err := readUsage(d.pid())
	if err != nil {
		return nil, err
	}
	// Hold them all from this one connection (it stays open, idle).
	work := make(chan string)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "idle"}, nil); err != nil {
					errs <- fmt.Errorf("hold %s: %w", id, err)
					return
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	time.Sleep(time.Second) // let start-up work (GC, first probe sweeps) settle before the window
	settled := settleRuntime([]int{d.pid()}, b.sz.settleFor)
	a, err := readUsage(d.pid())
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	time.Sleep(b.sz.idleFor) // the idle window itself
	z, err := readUsage(d.pid())
	if err != nil {
		return nil, err
	}
	el := time.Since(t0).Seconds()
	var st struct {
		Sessions api.SessionCounts `json:"sessions"`
	}
	if err := c.Call(ctx, "daemon.status", nil, &st); err != nil {
		return nil, err
	}
	if st.Sessions.Live != n {
		return nil, fmt.Errorf("idle: %d live sessions, want %d", st.Sessions.Live, n)
	}
	// schedstat has ns resolution (stat's ticks are 10 ms); it misses
	// threads that exit in the window, so take the larger of the two.
	cpuPct := max(float64(z.cpuTicks-a.cpuTicks)/clkTck, float64(z.runNs-a.runNs)/1e9) / el * 100
	wake := float64(z.switches-a.switches) / el
	return []figure{
		atMost(fmt.Sprintf("idle.cpu_%dheld", n), cpuPct, "%core", 0.2),
		atMost(fmt.Sprintf("idle.wakeups_%dheld", n), wake, "/s", 5),
		atMost(fmt.Sprintf("idle.rss_%dheld", n), float64(z.rssKiB)/1024, "MiB", 60),
		info("idle.rss_0held", float64(u0.rssKiB)/1024, "MiB"),
		info("idle.rss_per_held_session", float64(int64(z.rssKiB)-int64(u0.rssKiB))/float64(n), "KiB"),
		info("idle.settled_before_window", settled.Seconds(), "s"),
	}, nil
}
