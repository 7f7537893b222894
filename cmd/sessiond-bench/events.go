package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// coalesceWindow is the journal's default (internal/journal Options).
const coalesceWindow = 5 * time.Millisecond

// arrival is one notification as the subscriber saw it.
type arrival struct {
	at  time.Time
	raw []byte
}

// benchEvents: an echo child floods N deltas of 8 bytes; a subscriber on
// another connection notes when each agentSession.event arrives. Latency
// per delivered event = arrival − event.at (the journal's commit clock,
// same machine); throughput = provider deltas (delivered text bytes / 8)
// per second from send to the turn.completed notification.
func benchEvents(ctx context.Context, b *bench) ([]figure, error) {
	d, err := b.startDaemon("", "")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	var mu sync.Mutex
	var got []arrival
	done := make(chan struct{})
	var once sync.Once
	var lagged atomic.Bool
	sub, err := d.client(ctx, func(method string, p []byte) {
		now := time.Now()
		if method == "agentSession.lagged" {
			lagged.Store(true)
			once.Do(func() { close(done) })
		}
		if method != "agentSession.event" {
			return
		}
		mu.Lock()
		got = append(got, arrival{now, append([]byte(nil), p...)})
		mu.Unlock()
		if bytes.Contains(p, []byte(`"turn.completed"`)) {
			once.Do(func() { close(done) })
		}
	})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	var si api.SessionInfo
	if err := sub.Call(ctx, "agentSession.create", api.CreateParams{Provider: "echo", Cwd: b.root}, &si); err != nil {
		return nil, err
	}
	id := si.SessionID
	if err := sub.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "bench"}, nil); err != nil {
		return nil, err
	}
	if err := sub.Call(ctx, "agentSession.get", api.SessionParams{SessionID: id}, &si); err != nil {
		return nil, err
	}
	var ar api.AttachResult
	if err := sub.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: id, AfterSeq: si.LastSeq, Limit: 1}, &ar); err != nil {
		return nil, err
	}
	const chunk = 8
	u0, err := readUsage(d.pid())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := sub.Call(ctx, "agentSession.send", api.SendParams{SessionID: id, Text: fmt.Sprintf("/flood %d %d", b.sz.floodN, chunk)}, nil); err != nil {
		return nil, err
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return nil, errors.New("flood: no turn.completed within 5 min")
	}
	u1, err := readUsage(d.pid())
	if err != nil {
		return nil, err
	}
	if lagged.Load() {
		return nil, errors.New("flood: the subscriber was detached as lagged")
	}
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration // of the delivered message.delta events
	var completed time.Duration
	text, deltas := 0, 0
	for _, a := range got {
		var n api.EventNotice
		if err := json.Unmarshal(a.raw, &n); err != nil {
			return nil, fmt.Errorf("flood: decode notice: %w", err)
		}
		switch n.Event.Type {
		case event.MessageDelta:
			lat = append(lat, a.at.Sub(n.Event.At))
		case event.MessageCompleted:
			completed = a.at.Sub(n.Event.At)
		}
		if n.Event.Type == event.MessageDelta {
			var dd event.DeltaData
			json.Unmarshal(n.Event.Data, &dd)
			text += len(dd.Text)
			deltas++
		}
	}
	if os.Getenv("SESSIOND_BENCH_DEBUG") != "" {
		for i, a := range got {
			var n api.EventNotice
			json.Unmarshal(a.raw, &n)
			fmt.Fprintf(b.log, "event %d seq=%d type=%s bytes=%d at=+%v arrived=+%v lat=%v\n", i, n.Event.Seq, n.Event.Type,
				len(a.raw), n.Event.At.Sub(start), a.at.Sub(start), a.at.Sub(n.Event.At))
		}
	}
	el := got[len(got)-1].at.Sub(start)
	if text != b.sz.floodN*chunk {
		return nil, fmt.Errorf("flood: %d text bytes delivered, want %d", text, b.sz.floodN*chunk)
	}
	window := ms(coalesceWindow)
	return []figure{
		atLeast("events.provider_deltas_per_s", float64(b.sz.floodN)/el.Seconds(), "deltas/s", 50000),
		info("events.delivered_events_per_s", float64(len(got))/el.Seconds(), "events/s"),
		// CPU time is steadier than wall time on a shared machine.
		info("events.daemon_cpu_per_1k_deltas", float64(u1.cpuTicks-u0.cpuTicks)*1000/clkTck*1000/float64(b.sz.floodN), "ms"),
		info("events.coalesced_deltas_per_event", float64(b.sz.floodN)/float64(max(deltas, 1)), "deltas"),
		atMost("events.latency_p50", ms(pct(lat, 50)), "ms", window+10),
		atMost("events.latency_p99", ms(pct(lat, 99)), "ms", window+10),
		info("events.latency_max", ms(pct(lat, 100)), "ms"),
		// message.completed carries the whole answer (floodN*8 bytes).
		info("events.latency_message_completed", ms(completed), "ms"),
	}, nil
}
