package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/lease"
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
	// RuntimeID names the shared runtime the session's thread is on (one
	// of the handoff's runtimes): Child is then empty (the process is the
	// runtime's) and Adapter.State is the thread's state.
	RuntimeID string `json:"runtimeId,omitempty"`
}

// HandoffRuntime is one live shared runtime as the next image needs it:
// its process and pipes, the runtime adapter's state (request-id space,
// bound and detached threads; each bound thread's own state is in its
// session's HandoffSession), the threads its process has loaded (no other
// runtime may load them while it runs), and its release clock.
type HandoffRuntime struct {
	ID        string          `json:"runtimeId"`
	Provider  string          `json:"provider"`
	Account   string          `json:"account"`
	Child     proc.Handoff    `json:"child"`
	Adapter   provider.Paused `json:"adapter"`
	StartedAt time.Time       `json:"startedAt"`
	Loaded    []string        `json:"loaded,omitempty"`
	// ReleaseAt is when the runtime's release clock fires: set when it
	// is armed (no session is on the runtime).
	ReleaseAt *time.Time `json:"releaseAt,omitempty"`
}

// ErrNotHandedOver means a session could not be handed over; the upgrade
// is refused and the daemon carries on.
var ErrNotHandedOver = errors.New("session cannot be handed over")

// Quiesced is the host frozen for an upgrade: every loaded session's lock
// is held, every adapter's and every shared runtime's reader paused (and
// the runtimes' release clocks stopped), every sink drained.
type Quiesced struct {
	h        *Host
	Sessions []HandoffSession
	Runtimes []HandoffRuntime
	locked   []*entry
	paused   []provider.Handover
	pausedRT []provider.RuntimeHandover
	disarmed []*sharedRuntime // runtimes whose release clock Quiesce stopped
	children []*proc.Child
	owners   []string // children[i] is the process of owners[i] ("session ID", "runtime ID")
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
	h.mu.Lock()
	ids := make([]string, 0, len(h.sessions))
	for id := range h.sessions {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	sort.Strings(ids)
	var drain []*entry
	onRuntime := map[*sharedRuntime][]*entry{}
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
		case e.rt != nil && e.state == StateLive:
			onRuntime[e.rt] = append(onRuntime[e.rt], e) // handed over with its runtime, below
			continue
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
		q.children, q.owners = append(q.children, e.child), append(q.owners, "session "+id)
		q.Sessions = append(q.Sessions, h.handoffSession(e, ch, paused))
	}
	// Every session is locked: no thread binds to or leaves a runtime now.
	rtDrain, err := q.quiesceRuntimes(ctx, onRuntime)
	if err != nil {
		return nil, err
	}
	drain = append(drain, rtDrain...)
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

// handoffSession is e's part of the handoff. Needs the session lock.
func (h *Host) handoffSession(e *entry, ch proc.Handoff, paused provider.Paused) HandoffSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	releaseAt := h.clock.Now().Add(h.o.IdleTimeout)
	if len(e.holds) == 0 && e.releaseAt != nil {
		releaseAt = *e.releaseAt
	}
	return HandoffSession{ID: e.id, Fence: e.fence, Provider: e.rec.Provider, ThreadID: e.threadID,
		Child: ch, Adapter: paused, ReleaseAt: releaseAt.UTC()}
}

// quiesceRuntimes freezes every shared runtime for the handoff: its
// release clock stopped, its reader parked (every thread with it), its
// state and each bound session's thread state taken, its pipes made
// inheritable. It returns the bound sessions (their sinks are drained
// with the rest). Needs every session's lock (onRuntime: the live
// sessions on each runtime).
func (q *Quiesced) quiesceRuntimes(ctx context.Context, onRuntime map[*sharedRuntime][]*entry) ([]*entry, error) {
	h := q.h
	h.mu.Lock()
	rts := slices.SortedFunc(maps.Values(h.runtimes), func(a, b *sharedRuntime) int { return strings.Compare(a.id, b.id) })
	h.mu.Unlock()
	var drain []*entry
	for _, rt := range rts {
		rt.mu.Lock()
		state, tearing := rt.state, rt.tearing
		if state != runtimeLive || tearing {
			rt.mu.Unlock()
			if state == runtimeLive {
				state = runtimeStopping
			}
			return nil, fmt.Errorf("runtime %s: %w: it is %s; try again", rt.id, ErrNotHandedOver, state)
		}
		prov := h.o.Providers[rt.key.profile]
		ho, ok := rt.proto.(provider.RuntimeHandover)
		if !ok || prov.AdoptRuntime == nil {
			rt.mu.Unlock()
			return nil, fmt.Errorf("runtime %s: %w: provider %s (%T) cannot hand a shared runtime over", rt.id, ErrNotHandedOver, rt.key.profile, rt.proto)
		}
		var releaseAt *time.Time
		if rt.idle != nil {
			at := rt.idleAt.UTC()
			releaseAt = &at
			rt.idle.Stop()
			rt.idle = nil
			q.disarmed = append(q.disarmed, rt)
		}
		bound := len(rt.sessions)
		rt.mu.Unlock()
		if bound != len(onRuntime[rt]) {
			return nil, fmt.Errorf("runtime %s: %w: %d sessions are bound to it, %d of them live", rt.id, ErrNotHandedOver, bound, len(onRuntime[rt]))
		}
		paused, err := ho.Pause(ctx)
		if err != nil {
			return nil, fmt.Errorf("runtime %s: %w: %w", rt.id, ErrNotHandedOver, err)
		}
		q.pausedRT = append(q.pausedRT, ho)
		for _, e := range onRuntime[rt] {
			th, ok := e.adapter.(provider.Thread)
			if !ok {
				return nil, fmt.Errorf("session %s: %w: its adapter %T is not a thread of runtime %s", e.id, ErrNotHandedOver, e.adapter, rt.id)
			}
			st, err := ho.ThreadState(th)
			if err != nil {
				return nil, fmt.Errorf("session %s: %w: %w", e.id, ErrNotHandedOver, err)
			}
			s := h.handoffSession(e, proc.Handoff{}, provider.Paused{State: st})
			s.RuntimeID = rt.id
			q.Sessions = append(q.Sessions, s)
			drain = append(drain, e)
		}
		delete(onRuntime, rt)
		ch, err := rt.child.Handoff()
		if err != nil {
			return nil, fmt.Errorf("runtime %s: %w: %w", rt.id, ErrNotHandedOver, err)
		}
		q.children, q.owners = append(q.children, rt.child), append(q.owners, "runtime "+rt.id)
		h.mu.Lock()
		var loaded []string
		for th, owner := range h.loaded {
			if owner == rt {
				loaded = append(loaded, th)
			}
		}
		h.mu.Unlock()
		slices.Sort(loaded)
		q.Runtimes = append(q.Runtimes, HandoffRuntime{ID: rt.id, Provider: rt.key.profile, Account: rt.key.account,
			Child: ch, Adapter: paused, StartedAt: rt.startedAt, Loaded: loaded, ReleaseAt: releaseAt})
	}
	for rt, es := range onRuntime {
		return nil, fmt.Errorf("session %s: %w: its runtime %s is no longer live; try again", es[0].id, ErrNotHandedOver, rt.id)
	}
	return drain, nil
}

// Exited names ("session ID", "runtime ID") a handed-over process that exited
// since (its status reaped by this image), or "" when none did.
func (q *Quiesced) Exited() string {
	for i, c := range q.children {
		select {
		case <-c.Exited():
			return q.owners[i]
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
	for _, p := range q.pausedRT {
		p.Resume()
	}
	for _, rt := range q.disarmed {
		rt.mu.Lock()
		if rt.idle == nil && rt.state == runtimeLive && !rt.tearing && len(rt.sessions) == 0 {
			q.h.armRuntimeInLocked(rt, max(rt.idleAt.Sub(q.h.clock.Now()), 0))
		}
		rt.mu.Unlock()
	}
	for i := len(q.locked) - 1; i >= 0; i-- {
		q.locked[i].mu.Unlock()
	}
	q.children, q.owners, q.paused, q.pausedRT, q.disarmed, q.locked = nil, nil, nil, nil, nil, nil
}

// CheckHandover reads, in the old image, what the new one will need of
// each handed-over session from the store: its record and its lease,
// live at the handed-over fence. A session whose record or lease is
// damaged could not be adopted: the new image would exit and every
// session with it, so the upgrade is refused naming it (close or delete
// it first), and the daemon carries on.
func (h *Host) CheckHandover(sessions []HandoffSession) error {
	for _, s := range sessions {
		if _, err := h.record(s.ID); err != nil {
			return fmt.Errorf("session %s cannot be handed over (close it first: sessiond ctl close %s): %w", s.ID, s.ID, err)
		}
		lr, err := h.leases.Get(s.ID)
		if err == nil && (lr.Status != lease.Live || lr.Fence != s.Fence) {
			err = fmt.Errorf("lease (%s, fence %d) is not live at fence %d", lr.Status, lr.Fence, s.Fence)
		}
		if err != nil {
			return fmt.Errorf("session %s cannot be handed over (close it first: sessiond ctl close %s): lease: %w", s.ID, s.ID, err)
		}
	}
	return nil
}
