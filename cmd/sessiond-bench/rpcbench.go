package main

import (
	"context"
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
	var figs []figure
	for _, m := range []struct {
		name  string
		calls int
		op    op
	}{{"rpc.status", 1, status}, {"rpc.hold_release_pair", 2, pair}} {
		fs, err := latencyAB(ctx, b, d.socket, e.socket, m.name, m.calls, m.op)
		figs = append(figs, fs...)
		if err != nil {
			return figs, err
		}
		f, err := throughputAB(ctx, b, d.socket, e.socket, m.name, m.op)
		if err != nil {
			return figs, err
		}
		figs = append(figs, f)
	}
	return figs, nil
}

func dial(ctx context.Context, sock string) (*rpc.Client, error) {
	return rpc.Dial(ctx, sock, rpc.ClientOptions{Name: "sessiond-bench"})
}

// latencyAB times single calls on one client per side, in blocks of 50
// alternating daemon and baseline.
func latencyAB(ctx context.Context, b *bench, dsock, esock, name string, calls int, o op) ([]figure, error) {
	dc, err := dial(ctx, dsock)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	ec, err := dial(ctx, esock)
	if err != nil {
		return nil, err
	}
	defer ec.Close()
	const block = 50
	var dl, el []time.Duration
	for i := 0; i < 10; i++ { // warm both
		o(ctx, dc, 0)
		o(ctx, ec, 0)
	}
	for len(dl) < b.sz.rpcCalls/2 {
		for _, side := range []struct {
			c   *rpc.Client
			out *[]time.Duration
		}{{dc, &dl}, {ec, &el}} {
			for i := 0; i < block; i++ {
				t := time.Now()
				if err := o(ctx, side.c, 0); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				*side.out = append(*side.out, time.Since(t))
			}
		}
	}
	// The targets are per round trip; an op of k calls gets k times them.
	k := float64(calls)
	p50 := atMost(name+".p50_1client", us(pct(dl, 50)), "us", 100*k)
	p50.Baseline = us(pct(el, 50))
	p99 := atMost(name+".p99_1client", us(pct(dl, 99)), "us", 1000*k)
	p99.Baseline = us(pct(el, 99))
	return []figure{p50, p99}, nil
}

// throughputAB runs thrClients clients flat out against each side in
// alternating rounds and compares calls per second.
func throughputAB(ctx context.Context, b *bench, dsock, esock, name string, o op) (figure, error) {
	conns := func(sock string) ([]*rpc.Client, error) {
		cs := make([]*rpc.Client, b.sz.thrClients)
		for i := range cs {
			c, err := dial(ctx, sock)
			if err != nil {
				return cs, err
			}
			cs[i] = c
		}
		return cs, nil
	}
	dcs, err := conns(dsock)
	defer closeAll(dcs)
	if err != nil {
		return figure{}, err
	}
	ecs, err := conns(esock)
	defer closeAll(ecs)
	if err != nil {
		return figure{}, err
	}
	var dn, en int64
	var dt, et time.Duration
	for r := 0; r < b.sz.thrRounds; r++ {
		n, t, err := flatOut(ctx, dcs, b.sz.thrRound, o)
		if err != nil {
			return figure{}, fmt.Errorf("%s: %w", name, err)
		}
		dn, dt = dn+n, dt+t
		n, t, err = flatOut(ctx, ecs, b.sz.thrRound, o)
		if err != nil {
			return figure{}, fmt.Errorf("%s baseline: %w", name, err)
		}
		en, et = en+n, et+t
	}
	dr, er := float64(dn)/dt.Seconds(), float64(en)/et.Seconds()
	return ratioAtLeast(fmt.Sprintf("%s.throughput_%dclients", name, b.sz.thrClients), dr, er, "ops/s", 0.5), nil
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
