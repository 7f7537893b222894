package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
)

// turnDriver runs turns on one held session and answers every approval
// with approve, noting when the approval was answered.
type turnDriver struct {
	c  *rpc.Client
	id string

	mu       sync.Mutex
	answered time.Time
	done     chan struct{}
	deltas   map[string]int // event type (item.delta: +stream) -> text bytes delivered
}

func newTurnDriver(ctx context.Context, d *daemon, provider, cwd string) (*turnDriver, error) {
	t := &turnDriver{deltas: map[string]int{}}
	c, err := d.client(ctx, t.on)
	if err != nil {
		return nil, err
	}
	t.c = c
	var si api.SessionInfo
	if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: provider, Cwd: cwd}, &si); err != nil {
		return nil, err
	}
	t.id = si.SessionID
	if err := c.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: t.id, Limit: 1}, nil); err != nil {
		return nil, err
	}
	var h api.HoldResult
	if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: t.id, HolderID: "bench"}, &h); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *turnDriver) on(method string, p []byte) {
	if method != rpc.NotifyEvent {
		return
	}
	var n api.EventNotice
	if json.Unmarshal(p, &n) != nil {
		return
	}
	ev := n.Event
	var d struct {
		Text      string `json:"text"`
		Stream    string `json:"stream"`
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	t.mu.Lock()
	defer t.mu.Unlock()
	// One turn at a time, each waited for: every turn-scoped event is the
	// running turn's.
	if ev.TurnID == "" || t.done == nil {
		return
	}
	switch ev.Type {
	case event.MessageDelta:
		t.deltas[ev.Type] += len(d.Text)
	case event.ItemDelta:
		t.deltas[ev.Type+"."+d.Stream] += len(d.Text)
	case event.ApprovalRequested:
		// Answer off the notification goroutine: a call from here would
		// wait on the reader that runs this callback.
		go func() {
			t.mu.Lock()
			t.answered = time.Now()
			t.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			t.c.Call(ctx, "agentSession.respond", api.RespondParams{SessionID: t.id, RequestID: d.RequestID, Decision: "approve"}, nil)
		}()
	case event.TurnCompleted:
		close(t.done)
		t.done = nil
	}
}

// run sends text and waits for its turn.completed; it returns when the
// turn was sent and when its approval (if any) was answered.
func (t *turnDriver) run(ctx context.Context, text string) (sent, answered time.Time, err error) {
	done := make(chan struct{})
	t.mu.Lock()
	t.done, t.answered = done, time.Time{}
	clear(t.deltas)
	t.mu.Unlock()
	sent = time.Now()
	if err = t.c.Call(ctx, "agentSession.send", api.SendParams{SessionID: t.id, Text: text}, nil); err != nil {
		return sent, answered, err
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return sent, answered, errors.New("no turn.completed within 5 min")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return sent, t.answered, nil
}

// benchItems: the item path against the message path in one run, on one
// echo session. Message path: /flood N 8 (N message deltas). Item path:
// /work 1 N (N reasoning text deltas, an uncapped item stream) and
// /work N (N command output deltas, journaled up to the 64 KiB per-item
// cap, the rest counted). Each: provider deltas per second until the
// turn's turn.completed arrives (every event is committed before it is
// published: durable); the median of three interleaved rounds.
func benchItems(ctx context.Context, b *bench) ([]figure, error) {
	d, err := b.startDaemon("", "")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	t, err := newTurnDriver(ctx, d, "echo", b.root)
	if err != nil {
		return nil, err
	}
	defer t.c.Close()
	n := b.sz.floodN
	rate := func(text string, fromAnswer bool, key string, want int) (float64, error) {
		sent, answered, err := t.run(ctx, text)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", text, err)
		}
		el := time.Since(sent)
		if fromAnswer && !answered.IsZero() {
			el = time.Since(answered)
		}
		t.mu.Lock()
		got := t.deltas[key]
		t.mu.Unlock()
		if want > 0 && got != want {
			return 0, fmt.Errorf("%s: %d bytes of %s delivered, want %d", text, got, key, want)
		}
		return float64(n) / el.Seconds(), nil
	}
	// Three rounds, the three turns interleaved in each, medians reported:
	// on a shared machine one round's load says little.
	var msg, think, out []float64
	for r := 0; r < 3; r++ {
		for _, tc := range []struct {
			text       string
			fromAnswer bool
			key        string
			want       int
			into       *[]float64
		}{
			{fmt.Sprintf("/flood %d 8", n), false, event.MessageDelta, n * 8, &msg},
			{fmt.Sprintf("/work 1 %d", n), false, event.ItemDelta + "." + event.StreamReasoning, n * len("thinking"), &think},
			{fmt.Sprintf("/work %d", n), true, event.ItemDelta + "." + event.StreamOutput, 0, &out},
		} {
			v, err := rate(tc.text, tc.fromAnswer, tc.key, tc.want)
			if err != nil {
				return nil, err
			}
			*tc.into = append(*tc.into, v)
		}
	}
	t.mu.Lock()
	journaled := t.deltas[event.ItemDelta+"."+event.StreamOutput]
	t.mu.Unlock()
	return []figure{
		info("items.message_deltas_per_s", median(msg), "deltas/s"),
		ratioAtLeast("items.reasoning_deltas_per_s", median(think), median(msg), "deltas/s", 0.8),
		ratioAtLeast("items.output_deltas_per_s", median(out), median(msg), "deltas/s", 0.8),
		info("items.output_bytes_journaled", float64(journaled), "bytes"),
	}, nil
}
