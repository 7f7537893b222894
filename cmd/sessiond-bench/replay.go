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
// Pages are requested one at a time, so the wall time is the daemon's time
// plus the client's: the figure is measured with a client whose own cost
// per event is far below the daemon's (it walks each answer with
// scanPage, allocating nothing, and keeps only the count, the last seq and
// hasMore), the median of nine reads (three in each of three rounds; the
// first read after the daemon starts also validates the rows it finds in
// the file and is reported apart). Two more clients are interleaved with
// it, once a round, and reported for information: one that decodes each answer once
// into the result type (what a JavaScript client's single JSON.parse
// costs; the figure before the walker) and internal/rpc.Client (its
// jsonrpc2 decoding dominates). The walking client through `sessiond
// proxy` (as over ssh, without the network) is interleaved with the
// direct one and must reach 0.8× its rate.
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
	pc, err := dialProxy(ctx, b.bin, d.socket)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	// The walking client three times, the decoding one, then
	// internal/rpc.Client, three rounds. The daemon's own CPU time over
	// each of the walking client's replays is read too: on a loaded
	// machine it moves far less than the wall clock.
	var walk, proxied, raw, full, cpu []time.Duration
	legs := []struct {
		read func() (int, error)
		out  *[]time.Duration
	}{
		{func() (int, error) { return replayWalk(rc, ids[0]) }, &walk},
		{func() (int, error) { return replayWalk(pc.rawClient, ids[0]) }, &proxied},
		{func() (int, error) { return replayWalk(rc, ids[0]) }, &walk},
		{func() (int, error) { return replayWalk(pc.rawClient, ids[0]) }, &proxied},
		{func() (int, error) { return replayWalk(rc, ids[0]) }, &walk},
		{func() (int, error) { return replayWalk(pc.rawClient, ids[0]) }, &proxied},
		{func() (int, error) { return replay(ctx, rc, ids[0]) }, &raw},
		{func() (int, error) { return replay(ctx, c, ids[0]) }, &full},
	}
	if os.Getenv("SESSIOND_BENCH_RAW_ONLY") != "" {
		legs = []struct {
			read func() (int, error)
			out  *[]time.Duration
		}{legs[0], legs[2], legs[4]} // the walking client only, for profiling the daemon's side
	}
	debug := os.Getenv("SESSIOND_BENCH_DEBUG") != ""
	for r := 0; r < 3; r++ {
		for _, leg := range legs {
			u0, uerr := readUsage(d.pid())
			t := time.Now()
			n, err := leg.read()
			if err != nil {
				return nil, err
			}
			el := time.Since(t)
			*leg.out = append(*leg.out, el)
			u1, err := readUsage(d.pid())
			if uerr == nil && err == nil {
				if leg.out == &walk {
					cpu = append(cpu, time.Duration(u1.runNs-u0.runNs))
				}
				if debug {
					fmt.Fprintf(os.Stderr, "replay: round %d: %.0f events/s, daemon %.0f µs per 1k events\n",
						r, float64(n)/el.Seconds(), float64(u1.runNs-u0.runNs)/float64(n))
				}
			}
			if n != b.sz.replayEvents {
				return nil, fmt.Errorf("replay: read %d events, want %d", n, b.sz.replayEvents)
			}
		}
	}
	rate := func(d time.Duration) float64 { return float64(b.sz.replayEvents) / d.Seconds() }
	first := walk[0] // the first read after start validates the rows found in the file
	figs := []figure{
		atLeast("replay.events_per_s", rate(pct(walk, 50)), "events/s", 200000),
		info("replay.first_events_per_s", rate(first), "events/s"),
	}
	if len(proxied) > 0 {
		// The same walking client through `sessiond proxy` (a socket pair
		// to its stdio), interleaved with the direct reads; the first
		// direct read (row validation) is left out of this baseline.
		figs = append(figs, ratioAtLeast("replay.proxy_events_per_s", rate(pct(proxied, 50)), rate(pct(walk[1:], 50)), "events/s", 0.8))
	}
	if len(cpu) > 0 {
		figs = append(figs, info("replay.daemon_cpu_us_per_1k_events", us(pct(cpu, 50))/float64(b.sz.replayEvents)*1000, "µs"))
	}
	if len(raw) > 0 {
		figs = append(figs, info("replay.events_per_s_decoding_client", rate(pct(raw, 50)), "events/s"))
	}
	if len(full) > 0 {
		figs = append(figs, info("replay.events_per_s_go_rpc_client", rate(pct(full, 50)), "events/s"))
	}
	return figs, nil
}

// replayWalk is replay with the walking client; it also checks that the
// pages follow each other (each page's events continue after the last
// seq read) and that the last page's last seq is the journal's.
func replayWalk(rc *rawClient, id string) (int, error) {
	p, err := rc.CallPage("agentSession.attach", api.AttachParams{SessionID: id, Limit: 4096})
	if err != nil {
		return 0, err
	}
	sub := string(p.sub)
	n, last, more := p.events, p.last, p.more
	for more {
		p, err := rc.CallPage("agentSession.read", api.ReadParams{SessionID: id, AfterSeq: last, Limit: 4096})
		if err != nil {
			return n, err
		}
		if p.events > 0 {
			if p.last != last+uint64(p.events) {
				return n, fmt.Errorf("replay: a page of %d events after seq %d ends at seq %d", p.events, last, p.last)
			}
			last = p.last
		}
		n += p.events
		more = p.more
	}
	if last != uint64(n) {
		return n, fmt.Errorf("replay: %d events end at seq %d", n, last)
	}
	var none struct{}
	if err := rc.Call(context.Background(), "agentSession.detach", api.DetachParams{SubscriptionID: sub}, &none); err != nil {
		return n, err
	}
	return n, nil
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
