package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
)

// op is one measured operation on a client.
type op func(ctx context.Context, c *rpc.Client, worker int) error

// benchRPC: daemon.status and a hold+release pair on a held session, p50/p99
// at one client and throughput at many, each against the echo baseline in
// interleaved blocks.
func benchRPC(ctx context.Context, b *bench) ([]figure, error) {
	d, err := b.startDaemon("", "")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	e, err := b.startEcho()
	if err != nil {
		return nil, err
	}
	defer e.stop()
	owner, err := d.client(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer owner.Close()
	var info api.SessionInfo
	if err := owner.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: b.root}, &info); err != nil {
		return nil, err
	}
	id := info.SessionID
	if err := owner.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "bench-owner"}, nil); err != nil {
		return nil, err
	}
	status := func(ctx context.Context, c *rpc.Client, _ int) error {
		var st rpc.Status
		return c.Call(ctx, "daemon.status", nil, &st)
	}
	pair := func(ctx context.Context, c *rpc.Client, w int) error {
		holder := fmt.Sprintf("bench-%d", w)
		var hr api.HoldResult
		if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: holder}, &hr); err != nil {
			return err
		}
		var rr api.ReleaseResult
		return c.Call(ctx, "agentSession.release", api.ReleaseParams{SessionID: id, HolderID: holder, HoldToken: hr.HoldToken}, &rr)
	}
	if err := recordReplies(ctx, d.socket, e.socket, id); err != nil {
		return nil, err
	}
	sides := []rpcSide{
		{sock: d.socket},
		{sock: e.socket},
		{sock: e.socket, replay: true, suffix: "_vs_same_reply"},
	}
	var figs []figure
	for _, m := range []struct {
		name  string
		calls int
		op    op
	}{{"rpc.status", 1, status}, {"rpc.hold_release_pair", 2, pair}} {
		fs, err := latencyAB(ctx, b, sides, m.name, m.calls, m.op)
		figs = append(figs, fs...)
		if err != nil {
			return figs, err
		}
		fs, err = throughputAB(ctx, b, sides, m.name, m.op)
		figs = append(figs, fs...)
		if err != nil {
			return figs, err
		}
	}
	return figs, nil
}

// rpcSide is one server the calls are timed against: the daemon (the first),
// the echo server echoing params (the baseline of the figures without a
// suffix), and the echo server answering with the daemon's own replies.
type rpcSide struct {
	sock   string
	replay bool
	suffix string // of the figures against this baseline
}

func (s rpcSide) dial(ctx context.Context) (*rpc.Client, error) {
	c, err := dial(ctx, s.sock)
	if err != nil || !s.replay {
		return c, err
	}
	if err := c.Call(ctx, echoReplayMethod, nil, nil); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// recordReplies has the echo server answer daemon.status, hold and release
// with the bytes the daemon answered them with (the hold by a holder of
// its own, released at once).
func recordReplies(ctx context.Context, dsock, esock, id string) error {
	dc, err := dial(ctx, dsock)
	if err != nil {
		return err
	}
	defer dc.Close()
	ec, err := dial(ctx, esock)
	if err != nil {
		return err
	}
	defer ec.Close()
	var st, hr, rr json.RawMessage
	if err := dc.Call(ctx, "daemon.status", nil, &st); err != nil {
		return err
	}
	if err := dc.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "bench-record"}, &hr); err != nil {
		return err
	}
	var h api.HoldResult
	if err := json.Unmarshal(hr, &h); err != nil {
		return err
	}
	if err := dc.Call(ctx, "agentSession.release", api.ReleaseParams{SessionID: id, HolderID: "bench-record", HoldToken: h.HoldToken}, &rr); err != nil {
		return err
	}
	for m, res := range map[string]json.RawMessage{"daemon.status": st, "agentSession.hold": hr, "agentSession.release": rr} {
		if err := ec.Call(ctx, echoRecordMethod, recordParams{Method: m, Result: res}, nil); err != nil {
			return fmt.Errorf("echo server: record %s: %w", m, err)
		}
	}
	return nil
}

func dial(ctx context.Context, sock string) (*rpc.Client, error) {
	return rpc.Dial(ctx, sock, rpc.ClientOptions{Name: "sessiond-bench"})
}

// latencyAB times single calls on one client per side, in blocks of 50
// alternating the sides; every baseline side gets its p50 and p99.
func latencyAB(ctx context.Context, b *bench, sides []rpcSide, name string, calls int, o op) ([]figure, error) {
	cs := make([]*rpc.Client, len(sides))
	defer closeAll(cs)
	for i, sd := range sides {
		c, err := sd.dial(ctx)
		if err != nil {
			return nil, err
		}
		cs[i] = c
	}
	const block = 50
	ls := make([][]time.Duration, len(sides))
	for i := 0; i < 10; i++ { // warm every side
		for _, c := range cs {
			o(ctx, c, 0)
		}
	}
	for len(ls[0]) < b.sz.rpcCalls/2 {
		for s, c := range cs {
			for i := 0; i < block; i++ {
				t := time.Now()
				if err := o(ctx, c, 0); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				ls[s] = append(ls[s], time.Since(t))
			}
		}
	}
	// The targets are per round trip; an op of k calls gets k times them.
	k := float64(calls)
	var figs []figure
	for s := 1; s < len(sides); s++ {
		if sides[s].suffix == "" {
			p50 := atMost(name+".p50_1client", us(pct(ls[0], 50)), "us", 100*k)
			p50.Baseline = us(pct(ls[s], 50))
			p99 := atMost(name+".p99_1client", us(pct(ls[0], 99)), "us", 1000*k)
			p99.Baseline = us(pct(ls[s], 99))
			figs = append(figs, p50, p99)
			continue
		}
		figs = append(figs,
			ratioAtMost(name+".p50_1client"+sides[s].suffix, us(pct(ls[0], 50)), us(pct(ls[s], 50)), "us", 1.2),
			figure{Name: name + ".p99_1client" + sides[s].suffix, Value: us(pct(ls[0], 99)), Unit: "us", Baseline: us(pct(ls[s], 99))})
	}
	return figs, nil
}

// throughputAB runs thrClients clients flat out against each side in
// alternating rounds and compares calls per second.
func throughputAB(ctx context.Context, b *bench, sides []rpcSide, name string, o op) ([]figure, error) {
	cs := make([][]*rpc.Client, len(sides))
	defer func() {
		for _, c := range cs {
			closeAll(c)
		}
	}()
	for s, sd := range sides {
		cs[s] = make([]*rpc.Client, b.sz.thrClients)
		for i := range cs[s] {
			c, err := sd.dial(ctx)
			if err != nil {
				return nil, err
			}
			cs[s][i] = c
		}
	}
	ns := make([]int64, len(sides))
	ts := make([]time.Duration, len(sides))
	for r := 0; r < b.sz.thrRounds; r++ {
		for s := range sides {
			n, t, err := flatOut(ctx, cs[s], b.sz.thrRound, o)
			if err != nil {
				return nil, fmt.Errorf("%s (side %d): %w", name, s, err)
			}
			ns[s], ts[s] = ns[s]+n, ts[s]+t
		}
	}
	rate := func(s int) float64 { return float64(ns[s]) / ts[s].Seconds() }
	fname := fmt.Sprintf("%s.throughput_%dclients", name, b.sz.thrClients)
	var figs []figure
	for s := 1; s < len(sides); s++ {
		target := 0.5
		if sides[s].suffix != "" {
			target = 0.8
		}
		figs = append(figs, ratioAtLeast(fname+sides[s].suffix, rate(0), rate(s), "ops/s", target))
	}
	return figs, nil
}

func flatOut(ctx context.Context, cs []*rpc.Client, d time.Duration, o op) (int64, time.Duration, error) {
	var n atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, len(cs))
	start := time.Now()
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := o(ctx, c, i); err != nil {
					errs <- err
					return
				}
				n.Add(1)
			}
		}()
	}
	time.Sleep(d) // the measuring window itself
	stop.Store(true)
	wg.Wait()
	el := time.Since(start)
	select {
	case err := <-errs:
		return 0, 0, err
	default:
	}
	return n.Load(), el, nil
}

func closeAll(cs []*rpc.Client) {
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}
