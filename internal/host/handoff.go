package host

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider"
)

// A live upgrade (internal/daemon's upgrade*.go) freezes the host with
// Quiesce, writes what it returns into the handoff, and re-executes the
// daemon; the new image rebuilds the map with Adopt. docs/internals.md
// ("Live upgrade") describes each piece of the handoff and why it is there.

// HandoffSession is one live session as the next image needs it.
type HandoffSession struct {
	ID       string          `json:"sessionId"`
	Fence    uint64          `json:"fence"`
	Provider string          `json:"provider"`
	ThreadID string          `json:"threadId,omitempty"`
	Child    proc.Handoff    `json:"child"`
	Adapter  provider.Paused `json:"adapter"`
	// ReleaseAt is when the release clock fires: the armed clock of a
	// session nobody holds, else idle_timeout from now (every hold ends
	// with its connection at the upgrade; clients re-hold).
	ReleaseAt time.Time `json:"releaseAt"`
}

// ErrNotHandedOver means a session could not be handed over; the upgrade
// is refused and the daemon carries on.
var ErrNotHandedOver = errors.New("session cannot be handed over")

// Quiesced is the host frozen for an upgrade: every loaded session's lock
// is held, every adapter's reader paused and every sink drained.
type Quiesced struct {
	h        *Host
	Sessions []HandoffSession
	locked   []*entry
	paused   []provider.Handover
	children []*proc.Child
}

// Quiesce freezes the host for a live upgrade within ctx: it takes every
// session's lock (a child that exited on its own is torn down first, as
// its watcher would), pauses each adapter's reader at a message boundary,
// drains each sink so everything emitted is committed, and makes the
// children's pipes inheritable. On error nothing stays frozen.
func (h *Host) Quiesce(ctx context.Context) (q *Quiesced, err error) {
	// frozen, not the named result: every error path returns a nil q, and
	// what it froze must still be let go.
	frozen := &Quiesced{h: h}
	q = frozen
	defer func() {
		if err != nil {
			frozen.Abandon()
			q = nil
		}
	}()
	// A shared runtime cannot be handed over yet: one serving nobody (its
	// release clock running) is stopped now; one with sessions refuses
	// the upgrade below, through its sessions.
	h.stopIdleRuntimes()
	h.mu.Lock()
	ids := make([]string, 0, len(h.sessions))
	for id := range h.sessions {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	sort.Strings(ids)
	var drain []*entry
	for _, id := range ids {
		e, err := h.lockEntry(ctx, id, false)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w: %w", id, ErrNotHandedOver, err)
		}
		if e == nil {
			continue
		}
		if e.state == StateExited {
			if _, err := h.evictLocked(context.WithoutCancel(ctx), e, evictExited); err != nil {
				h.scheduleRetryLocked(e, evictExited)
				e.mu.Unlock()
				return nil, fmt.Errorf("session %s: %w: its exited provider could not be torn down: %w", id, ErrNotHandedOver, err)
			}
		}
		q.locked = append(q.locked, e)
		switch {
		case e.state == StateStored || e.gone:
			continue // nothing runs
		case e.rt != nil:
			return nil, fmt.Errorf("session %s: %w: it runs on shared runtime %s, which cannot be handed over yet: close the session or wait for it to be released",
				id, ErrNotHandedOver, e.rt.id)
		case e.state != StateLive || e.child == nil:
			return nil, fmt.Errorf("session %s: %w: it is %s", id, ErrNotHandedOver, e.state)
		}
		prov := h.o.Providers[e.rec.Provider]
		ho, ok := e.adapter.(provider.Handover)
		if !ok || prov.Adopt == nil {
			return nil, fmt.Errorf("session %s: %w: provider %s (%T) cannot be handed over yet: close the session or wait for it to be released",
				id, ErrNotHandedOver, e.rec.Provider, e.adapter)
		}
		paused, err := ho.Pause(ctx)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w: %w", id, ErrNotHandedOver, err)
		}
		q.paused = append(q.paused, ho)
		drain = append(drain, e)
		ch, err := e.child.Handoff()
		if err != nil {
			return nil, fmt.Errorf("session %s: %w: %w", id, ErrNotHandedOver, err)
		}
		q.children = append(q.children, e.child)
		h.mu.Lock()
		releaseAt := h.clock.Now().Add(h.o.IdleTimeout)
		if len(e.holds) == 0 && e.releaseAt != nil {
			releaseAt = *e.releaseAt
		}
		s := HandoffSession{ID: id, Fence: e.fence, Provider: e.rec.Provider, ThreadID: e.threadID,
			Child: ch, Adapter: paused, ReleaseAt: releaseAt.UTC()}
		h.mu.Unlock()
		q.Sessions = append(q.Sessions, s)
	}
	// Every reader is paused: the sinks get nothing more. Drained side by
	// side, their tails share the journal's group commits.
	errs := make([]error, len(drain))
	var wg sync.WaitGroup
	for i, e := range drain {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.sink.Drain(ctx); err != nil {
				errs[i] = fmt.Errorf("session %s: %w: journal: %w", e.id, ErrNotHandedOver, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return q, nil
}

// Exited names a handed-over session whose child has exited since (its
// status reaped by this image), or "".
func (q *Quiesced) Exited() string {
	for i, c := range q.children {
		select {
		case <-c.Exited():
			return q.Sessions[i].ID
		default:
		}
	}
	return ""
}

// Abandon unfreezes the host: the upgrade did not happen. Pipes get
// close-on-exec again, readers go on, session locks are let go.
func (q *Quiesced) Abandon() {
	for _, c := range q.children {
		c.KeepCloseOnExec()
	}
	for _, p := range q.paused {
		p.Resume()
	}
	for i := len(q.locked) - 1; i >= 0; i-- {
		q.locked[i].mu.Unlock()
	}
	q.children, q.paused, q.locked = nil, nil, nil
}
