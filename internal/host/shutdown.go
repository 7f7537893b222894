package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/sessiond/sessiond/internal/budget"
)

// shutdownParallel bounds the evictions Shutdown runs at once.
const shutdownParallel = 32

// errShuttingDown is why a provider start in progress at the shutdown gave up.
var errShuttingDown = errors.New("the daemon is shutting down")

// BeginShutdown makes every write to a live child give up at once (and
// every request waiting for a child's answer), so that whoever waits for
// in-flight calls before Shutdown (the RPC server's Close) never waits
// behind a send blocked on a provider that stopped reading. Calls that
// reach a child afterwards fail as if it were stopping; Shutdown follows.
func (h *Host) BeginShutdown() {
	h.cancelStarts(errShuttingDown)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopAllMapLocked()
}

// stopAllMapLocked begins the stop of every loaded child. Needs the map lock.
func (h *Host) stopAllMapLocked() {
	for _, e := range h.sessions {
		if e.state == StateLive || e.state == StateExited {
			h.beginStopMapLocked(e)
		}
	}
}

// Shutdown evicts every live session through the same steps, then makes a
// last cleanup attempt. It runs once; later calls wait for nothing. It is
// bounded by ctx and by its own bound (every session's eviction, side by
// side, a batch at a time): a session it cannot finish in time (its lock
// held by a stuck step) is logged and left, never waited for.
func (h *Host) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil
	}
	h.closing = true
	h.cancelStarts(errShuttingDown) // a start holds its session's lock: end it first
	ids := make([]string, 0, len(h.sessions))
	for id := range h.sessions {
		ids = append(ids, id)
	}
	h.stopAllMapLocked() // no eviction waits behind a blocked send
	subs := make([]*subscription, 0, len(h.subs))
	for id, s := range h.subs {
		subs = append(subs, s)
		delete(h.subs, id)
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.feed.Close()
	}
	ctx, cancel := context.WithTimeout(ctx, budget.EvictAll(budget.Ladder(h.o.Ladder), h.o.StepTimeout, len(ids), shutdownParallel))
	defer cancel()
	// Sessions are independent: evict them side by side (a stubborn child
	// costs the whole ladder), a bounded number at a time.
	var (
		errs    []error
		mu      sync.Mutex // guards errs and pending
		pending = make(map[string]bool, len(ids))
		wg      sync.WaitGroup
		slots   = make(chan struct{}, shutdownParallel)
	)
	for _, id := range ids {
		pending[id] = true
	}
	for _, id := range ids {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue // left pending: reported below
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			err := h.shutdownOne(ctx, id)
			if ctx.Err() != nil && err != nil {
				return // out of time: reported as given up on
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			delete(pending, id)
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-ctx.Done():
	}
	// A goroutine given up on may still finish: copy what is known now.
	mu.Lock()
	out := slices.Clone(errs)
	left := slices.Sorted(maps.Keys(pending))
	mu.Unlock()
	if len(left) > 0 {
		h.log.Error("shutdown gave up on sessions", "session_ids", left, "err", ctx.Err())
		out = append(out, fmt.Errorf("shutdown: gave up on %d session(s) %v: %w", len(left), left, ctx.Err()))
	}
	h.stopRuntimes() // after their sessions: a runtime outlives every session on it
	h.cleanup.CloseAll(ctx)
	waited := make(chan struct{})
	go func() { h.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		out = append(out, fmt.Errorf("shutdown: children still being watched: %w", ctx.Err()))
	}
	return errors.Join(out...)
}

// shutdownOne evicts one session for Shutdown, bounded by ctx.
func (h *Host) shutdownOne(ctx context.Context, id string) error {
	e, err := h.lockEntry(ctx, id, false)
	if err != nil || e == nil {
		return err
	}
	defer e.mu.Unlock()
	if e.state != StateLive && e.state != StateExited {
		return nil
	}
	_, err = h.evictLocked(ctx, e, evictShutdown)
	return err
}
