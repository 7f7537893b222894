package main

import (
	"context"
	"fmt"
	"time"
)

// benchStartup: time from exec to the socket accepting a connection, on a
// state dir of startSessions stored sessions with startEvents events each,
// A/B interleaved with a start on an empty state dir (the baseline).
func benchStartup(ctx context.Context, b *bench) ([]figure, error) {
	dir, _, err := b.prefill(ctx, b.sz.startSessions, b.sz.startEvents)
	if err != nil {
		return nil, err
	}
	var full, empty []time.Duration
	for r := 0; r < b.sz.startRuns; r++ {
		for _, side := range []struct {
			dir string
			out *[]time.Duration
		}{{dir, &full}, {"", &empty}} {
			d, err := b.startDaemon(side.dir, "")
			if err != nil {
				return nil, err
			}
			*side.out = append(*side.out, d.ready)
			if err := d.stop(); err != nil {
				return nil, err
			}
		}
	}
	f := atMost(fmt.Sprintf("startup.%dsessions_x%d_events", b.sz.startSessions, b.sz.startEvents), ms(pct(full, 50)), "ms", 1000)
	f.Baseline = ms(pct(empty, 50))
	return []figure{f}, nil
}
