package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// benchReplay: a journal of replayEvents events read by a client from seq 0:
// attach, then read pages of 4096 until hasMore=false, over the socket.
// The figure is the median of three reads with a lean client that decodes
// each answer once (rawclient.go), A/B interleaved with internal/rpc.Client
// (reported for information: its jsonrpc2 decoding dominates).
func benchReplay(ctx context.Context, b *bench) ([]figure, error) {
	dir, ids, err := b.prefill(ctx, 1, b.sz.replayEvents)
	if err != nil {
		return nil, err
	}
	d, err := b.startDaemon(dir, "")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	c, err := d.client(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rc, err := dialRaw(ctx, d.socket)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// A/B: the lean client, then internal/rpc.Client, three times. The
	// daemon's own CPU time over the lean client's replays is counted too:
	// on a loaded machine it moves far less than the wall clock.
	var raw, full []time.Duration
	var daemonNs uint64
	for r := 0; r < 3; r++ {
		for _, side := range []struct {
			c   caller
			out *[]time.Duration
		}{{rc, &raw}, {c, &full}}[:legs()] {
			u0, uerr := readUsage(d.pid())
			t := time.Now()
			n, err := replay(ctx, side.c, ids[0])
			if err != nil {
				return nil, err
			}
			*side.out = append(*side.out, time.Since(t))
			if u1, err := readUsage(d.pid()); side.out == &raw && uerr == nil && err == nil {
				daemonNs += u1.runNs - u0.runNs
			}
			if n != b.sz.replayEvents {
				return nil, fmt.Errorf("replay: read %d events, want %d", n, b.sz.replayEvents)
			}
		}
	}
	rate := func(d time.Duration) float64 { return float64(b.sz.replayEvents) / d.Seconds() }
	figs := []figure{
		atLeast("replay.events_per_s", rate(pct(raw, 50)), "events/s", 200000),
		info("replay.first_events_per_s", rate(raw[0]), "events/s"),
		info("replay.daemon_cpu_us_per_1k_events", float64(daemonNs)/1e3/float64(len(raw))/float64(b.sz.replayEvents)*1000, "µs"),
	}
	if len(full) > 0 {
		figs = append(figs, info("replay.events_per_s_go_rpc_client", rate(pct(full, 50)), "events/s"))
	}
	return figs, nil
}

// caller is what replay needs of a client.
type caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

func replay(ctx context.Context, c caller, id string) (int, error) {
	var ar api.AttachResult
	if err := c.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: id, Limit: 4096}, &ar); err != nil {
		return 0, err
	}
	n, last, more := len(ar.Events), uint64(0), ar.HasMore
	if n > 0 {
		last = ar.Events[n-1].Seq
	}
	for more {
		var rr api.ReadResult
		if err := c.Call(ctx, "agentSession.read", api.ReadParams{SessionID: id, AfterSeq: last, Limit: 4096}, &rr); err != nil {
			return n, err
		}
		n += len(rr.Events)
		if len(rr.Events) > 0 {
			last = rr.Events[len(rr.Events)-1].Seq
		}
		more = rr.HasMore
	}
	var none struct{}
	if err := c.Call(ctx, "agentSession.detach", api.DetachParams{SubscriptionID: ar.SubscriptionID}, &none); err != nil {
		return n, err
	}
	return n, nil
}

// legs is 1 (the lean client only) when SESSIOND_BENCH_RAW_ONLY is set, for
// profiling the daemon's side alone.
func legs() int {
	if os.Getenv("SESSIOND_BENCH_RAW_ONLY") != "" {
		return 1
	}
	return 2
}
