package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

// errLagged: the daemon detached our subscription for being too slow.
var errLagged = errors.New("subscription lagged and was detached by the daemon")

// notices queues the client's notifications without ever blocking its
// read loop.
type notices struct {
	mu     sync.Mutex
	q      []event.Event
	lagged *api.LaggedNotice
	sig    chan struct{}
}

func newNotices() *notices { return &notices{sig: make(chan struct{}, 1)} }

func (n *notices) on(method string, params json.RawMessage) {
	n.mu.Lock()
	switch method {
	case rpc.NotifyEvent:
		var p api.EventNotice
		if json.Unmarshal(params, &p) == nil {
			n.q = append(n.q, p.Event)
		}
	case rpc.NotifyLagged:
		var p api.LaggedNotice
		if json.Unmarshal(params, &p) == nil {
			n.lagged = &p
		}
	}
	n.mu.Unlock()
	select {
	case n.sig <- struct{}{}:
	default:
	}
}

// next returns the next event; errLagged after a lagged notice (queued
// events first), ctx's error, or an error once the connection is gone.
func (n *notices) next(ctx context.Context, gone <-chan struct{}) (event.Event, error) {
	for {
		n.mu.Lock()
		if len(n.q) > 0 {
			ev := n.q[0]
			n.q = n.q[1:]
			n.mu.Unlock()
			return ev, nil
		}
		lagged := n.lagged
		n.mu.Unlock()
		if lagged != nil {
			return event.Event{}, fmt.Errorf("after seq %d: %w", lagged.LastDeliveredSeq, errLagged)
		}
		select {
		case <-n.sig:
		case <-ctx.Done():
			return event.Event{}, ctx.Err()
		case <-gone:
			return event.Event{}, errors.New("the daemon closed the connection")
		}
	}
}

// printEvent writes one event: a JSON line with --json, else a text line.
func printEvent(w io.Writer, asJSON bool, ev event.Event) {
	if asJSON {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	turn := ev.TurnID
	if turn == "" {
		turn = "-"
	}
	data := string(ev.Data)
	if data == "" {
		data = "-"
	}
	fmt.Fprintf(w, "%6d  %s  %-24s  %-14s  %s\n", ev.Seq, ev.At.Format(time.RFC3339Nano), tty.Safe(ev.Type), tty.Safe(turn), tty.Safe(data))
}
