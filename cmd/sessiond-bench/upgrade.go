package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
)

// benchUpgrade: with upgradeSessions live sessions (upgradeFloods of them
// streaming a /flood), the time from daemon.upgrade to the new image
// answering it (it answers once accepting again), against the cold start
// of an empty daemon in the same run (exec to accepting); and the longest
// gap between two consecutive journaled events of a streaming session
// across the upgrades.
func benchUpgrade(ctx context.Context, b *bench) ([]figure, error) {
	var cold []time.Duration
	for range b.sz.startRuns {
		d, err := b.startDaemon("", "")
		if err != nil {
			return nil, err
		}
		cold = append(cold, d.ready)
		if err := d.stop(); err != nil {
			return nil, err
		}
	}
	d, err := b.startDaemon("", "")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	c, err := d.client(ctx, nil)
	if err != nil {
		return nil, err
	}
	ids, err := holdMany(ctx, c, b.root, b.sz.upgradeSessions)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.Close()
	upgrade := func() (time.Duration, error) {
		c, err := d.client(ctx, nil)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		start := time.Now()
		var r api.UpgradeResult
		if err := c.Call(ctx, "daemon.upgrade", api.UpgradeParams{Binary: b.bin}, &r); err != nil {
			return 0, fmt.Errorf("upgrade: %w (%s)", err, tail(d.logPath))
		}
		if r.PID != d.pid() {
			return 0, fmt.Errorf("upgrade answered pid %d, the daemon is %d", r.PID, d.pid())
		}
		return time.Since(start), nil
	}
	// Idle live sessions first (the figure), then with floods streaming.
	var took, paused, tookFlooding []time.Duration
	for range b.sz.startRuns {
		dt, err := upgrade()
		if err != nil {
			return nil, err
		}
		took = append(took, dt)
		p, err := upgradePause(d.logPath)
		if err != nil {
			return nil, err
		}
		paused = append(paused, p)
	}
	floods := ids[:min(b.sz.upgradeFloods, len(ids))]
	if c, err = d.client(ctx, nil); err != nil {
		return nil, err
	}
	for _, id := range floods {
		if err := c.Call(ctx, "agentSession.send", api.SendParams{SessionID: id, Text: fmt.Sprintf("/flood %d 8", b.sz.upgradeFloodN)}, nil); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.Close()
	for range b.sz.startRuns {
		time.Sleep(200 * time.Millisecond) // let the floods stream between upgrades (not a wait for anything)
		dt, err := upgrade()
		if err != nil {
			return nil, err
		}
		tookFlooding = append(tookFlooding, dt)
	}
	c, err = d.client(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	gap, err := longestGap(ctx, c, floods)
	if err != nil {
		return nil, err
	}
	up, base := ms(pct(took, 50)), ms(pct(cold, 50))
	f := figure{Name: fmt.Sprintf("upgrade.%dsessions_to_accepting_p50", len(ids)), Value: up, Unit: "ms", Baseline: base,
		Target: "ratio<=3", OK: base > 0 && up/base <= 3}
	// The pause alone (information): the daemon's own log, from "upgrade
	// started" (the binary checked, calls about to be held) to "upgrade
	// complete" (the new image accepting, the caller answered).
	pz := info(fmt.Sprintf("upgrade.%dsessions_pause_p50", len(ids)), ms(pct(paused, 50)), "ms")
	pz.Baseline = base
	fl := info(fmt.Sprintf("upgrade.%dsessions_%dflooding_to_accepting_p50", len(ids), len(floods)), ms(pct(tookFlooding, 50)), "ms")
	fl.Baseline = base
	return []figure{f, pz, fl, info(fmt.Sprintf("upgrade.longest_event_gap_%dfloods", len(floods)), ms(gap), "ms")}, nil
}

// holdMany creates and holds n echo sessions (8 at a time) from c.
func holdMany(ctx context.Context, c *rpc.Client, cwd string, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		var si api.SessionInfo
		if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: cwd}, &si); err != nil {
			return nil, err
		}
		ids[i] = si.SessionID
	}
	work, errs := make(chan string), make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "upgrade"}, nil); err != nil {
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
	return ids, nil
}

// longestGap is the longest time between two consecutive events of each
// session's first turn (its flood), over the sessions.
func longestGap(ctx context.Context, c *rpc.Client, ids []string) (time.Duration, error) {
	var worst time.Duration
	for _, id := range ids {
		var prev time.Time
		inTurn := false
		for after := uint64(0); ; {
			var r api.ReadResult
			if err := c.Call(ctx, "agentSession.read", api.ReadParams{SessionID: id, AfterSeq: after, Limit: 4096}, &r); err != nil {
				return 0, err
			}
			for _, ev := range r.Events {
				if ev.Type == event.TurnStarted {
					inTurn = true
				} else if inTurn && !prev.IsZero() {
					worst = max(worst, ev.At.Sub(prev))
				}
				if inTurn {
					prev = ev.At
				}
				if ev.Type == event.TurnCompleted {
					inTurn = false
				}
			}
			if len(r.Events) == 0 || !r.HasMore {
				break
			}
			after = r.Events[len(r.Events)-1].Seq
		}
	}
	return worst, nil
}

// upgradePause reads the last upgrade's pause from the daemon's JSON log:
// the time of its last "upgrade started" line to that of the "upgrade
// complete" line after it (logged just after the answer: it is waited for).
func upgradePause(logPath string) (time.Duration, error) {
	for deadline := time.Now().Add(10 * time.Second); ; {
		d, err := logPause(logPath)
		if err == nil || time.Now().After(deadline) {
			return d, err
		}
		time.Sleep(time.Millisecond) // another process's log: nothing to wait on but the file
	}
}

func logPause(logPath string) (time.Duration, error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return 0, err
	}
	var started, complete time.Time
	for _, line := range bytes.Split(b, []byte("\n")) {
		var l struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal(line, &l) != nil {
			continue
		}
		switch l.Msg {
		case "upgrade started":
			started, complete = l.Time, time.Time{}
		case "upgrade complete":
			complete = l.Time
		}
	}
	if started.IsZero() || complete.IsZero() {
		return 0, fmt.Errorf("no \"upgrade started\" then \"upgrade complete\" in %s", logPath)
	}
	return complete.Sub(started), nil
}
