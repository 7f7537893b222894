package host

import (
	"context"
	"sort"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// Hold takes (or renews) holderId's hold on a session, starting its
// provider child when none runs, and returns once the child is ready.
func (h *Host) Hold(ctx context.Context, conn string, p api.HoldParams) (api.HoldResult, error) {
	if p.HolderID == "" {
		return api.HoldResult{}, api.InvalidParam("holderId", "required")
	}
	if p.TTLMs != nil && *p.TTLMs <= 0 {
		return api.HoldResult{}, api.InvalidParam("ttlMs", "must be positive")
	}
	if _, err := h.record(p.SessionID); err != nil {
		return api.HoldResult{}, err
	}
	if err := h.connBegin(conn, true); err != nil {
		return api.HoldResult{}, err
	}
	defer h.connEnd(conn)

	e, err := h.lockLiveEntry(ctx, p.SessionID)
	if err != nil {
		return api.HoldResult{}, err
	}
	defer e.mu.Unlock()
	var ttl time.Duration
	if p.TTLMs != nil {
		ttl = time.Duration(*p.TTLMs) * time.Millisecond
	}
	token := newID("h_")
	res := api.HoldResult{SessionID: e.id, State: "live", HoldToken: token}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.holds++
	hd := e.holds[p.HolderID]
	if hd == nil {
		hd = &hold{}
		e.holds[p.HolderID] = hd
	} else if cs := h.conns[hd.conn]; cs != nil {
		cs.holds--
	}
	if hd.ttl != nil {
		hd.ttl.Stop()
		hd.ttl = nil
	}
	hd.conn, hd.token = conn, token
	h.conns[conn].holds++
	if ttl > 0 {
		holder := p.HolderID
		hd.ttl = h.clock.AfterFunc(ttl, func() { h.dropHold(e, holder, token, "ttl") })
	}
	h.disarmLocked(e)
	res.Fence, res.PID, res.ThreadID = e.fence, e.pid, e.threadID
	res.Holders = holderIDs(e)
	if h.conns[conn].closed {
		// The connection closed before its hold completed: drop it at once.
		h.dropHoldMapLocked(e, p.HolderID, token, "disconnect")
	}
	return res, nil
}

// lockLiveEntry returns the session's entry, locked, with a ready child:
// it waits out an eviction in progress, finishes the teardown of a child
// that exited on its own, and starts a child when none runs.
func (h *Host) lockLiveEntry(ctx context.Context, id string) (*entry, error) {
	for {
		e, err := h.lockEntry(ctx, id, true)
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		exited := e.exited
		h.mu.Unlock()
		switch {
		case e.state == StateLive && exited:
			_, err := h.evictLocked(context.WithoutCancel(ctx), e, evictExited)
			if err != nil {
				h.scheduleRetryLocked(e, evictExited)
			}
			e.mu.Unlock()
			if err != nil {
				return nil, err
			}
			continue
		case e.state == StateStored:
			if err := h.startLocked(ctx, e); err != nil {
				e.mu.Unlock()
				return nil, err
			}
		}
		return e, nil
	}
}

// Release drops holderId's hold. Idempotent: an unknown holder, or a token
// of an older incarnation, is released:false and changes nothing.
func (h *Host) Release(ctx context.Context, conn string, p api.ReleaseParams) (api.ReleaseResult, error) {
	if p.HolderID == "" {
		return api.ReleaseResult{}, api.InvalidParam("holderId", "required")
	}
	if _, err := h.record(p.SessionID); err != nil {
		return api.ReleaseResult{}, err
	}
	// The session lock queues a release behind a hold still starting the
	// child (a pipelined hold+release must not overtake it).
	e, err := h.lockEntry(ctx, p.SessionID, false)
	if err != nil {
		return api.ReleaseResult{}, err
	}
	if e == nil {
		return api.ReleaseResult{Released: false, Holders: []string{}}, nil
	}
	defer e.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	released := h.dropHoldMapLocked(e, p.HolderID, p.HoldToken, "release")
	return api.ReleaseResult{Released: released, Holders: holderIDs(e), ReleaseAt: e.releaseAt}, nil
}

// dropHold is dropHoldMapLocked taking the map lock (timer callbacks).
func (h *Host) dropHold(e *entry, holder, token, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropHoldMapLocked(e, holder, token, why)
}

// dropHoldMapLocked removes holder from e if its token matches (empty token:
// any) and arms the release clock when the set empties. Needs the map lock.
func (h *Host) dropHoldMapLocked(e *entry, holder, token, why string) bool {
	hd := e.holds[holder]
	if hd == nil || (token != "" && hd.token != token) {
		return false
	}
	if hd.ttl != nil {
		hd.ttl.Stop()
	}
	if cs := h.conns[hd.conn]; cs != nil {
		cs.holds--
	}
	delete(e.holds, holder)
	h.stats.releases++
	h.log.Debug("hold dropped", "session_id", e.id, "holder", holder, "why", why)
	if len(e.holds) == 0 && !e.gone {
		h.armLocked(e, h.o.IdleTimeout)
	}
	return true
}

// armLocked starts (or restarts) e's release clock. Needs the map lock.
func (h *Host) armLocked(e *entry, d time.Duration) {
	if e.idle != nil {
		e.idle.Stop()
	}
	at := h.clock.Now().Add(d)
	e.releaseAt = &at
	var t Timer
	t = h.clock.AfterFunc(d, func() { h.releaseClockFired(e, t) })
	e.idle = t
}

// disarmLocked cancels e's release clock (and any eviction retry). Needs the map lock.
func (h *Host) disarmLocked(e *entry) {
	if e.idle != nil {
		e.idle.Stop()
		e.idle = nil
	}
	e.releaseAt = nil
	e.retry = 0
}

// releaseClockFired evicts e if nobody holds it and it is idle; a running
// turn or pending approval re-arms the clock instead.
// It is not counted in h.wg (an Add racing Shutdown's Wait is a misuse):
// Shutdown takes every session lock, so it waits for a running eviction.
func (h *Host) releaseClockFired(e *entry, t Timer) {
	// A teardown that is owed (a retry, an exited child) goes ahead: end any
	// write blocking the session lock. An idle eviction does not wait for a
	// lock somebody is using (a send, a start): that is activity, so the
	// clock starts again.
	h.mu.Lock()
	if e.idle != t || e.gone || h.closing {
		h.mu.Unlock()
		return
	}
	if e.retry > 0 || e.exited {
		h.beginStopMapLocked(e)
		h.mu.Unlock()
		e.mu.Lock()
	} else {
		h.mu.Unlock()
		if !e.mu.TryLock() {
			h.mu.Lock()
			if e.idle == t && !e.gone && !h.closing {
				h.log.Debug("release clock re-armed: session in use", "session_id", e.id)
				h.armLocked(e, h.o.IdleTimeout)
			}
			h.mu.Unlock()
			return
		}
	}
	defer e.mu.Unlock()
	h.mu.Lock()
	retrying, exited := e.retry > 0, e.exited
	cause := evictIdle
	switch {
	case exited:
		cause = evictExited
	case retrying:
		cause = e.retryWhy
	}
	// Holds keep a loaded child, but not one that is already gone.
	stale := e.gone || e.idle != t || e.state != StateLive || h.closing || (len(e.holds) > 0 && !exited)
	if !stale {
		e.idle = nil
	}
	h.mu.Unlock()
	if stale {
		return
	}
	// A running turn or pending approval defers an idle eviction; a retry of
	// a failed teardown (whose open turn it is meant to close) goes ahead.
	if !retrying && !exited && h.busyLocked(e) {
		h.log.Debug("release clock re-armed: turn running", "session_id", e.id)
		h.mu.Lock()
		h.armLocked(e, h.o.IdleTimeout)
		h.mu.Unlock()
		return
	}
	if _, err := h.evictLocked(context.Background(), e, cause); err != nil {
		h.scheduleRetryLocked(e, cause)
	}
}

// scheduleRetryLocked re-arms a failed eviction with backoff (1s, 2s, … 60s).
// A hold meanwhile cancels it. Needs the session lock.
func (h *Host) scheduleRetryLocked(e *entry, cause evictCause) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.gone || (len(e.holds) > 0 && !e.exited) {
		return // a hold keeps the loaded child; its next close retries
	}
	e.retry++
	e.retryWhy = cause
	d := time.Second << min(e.retry-1, 6)
	d = min(d, time.Minute)
	h.log.Warn("eviction will be retried", "session_id", e.id, "attempt", e.retry, "in", d)
	retry := e.retry
	h.armLocked(e, d)
	e.retry, e.retryWhy = retry, cause
}

// ConnClosed ends the holds last taken on conn and its subscriptions.
func (h *Host) ConnClosed(conn string) {
	h.mu.Lock()
	cs := h.conns[conn]
	if cs != nil {
		cs.closed = true
	}
	for _, e := range h.sessions {
		for holder, hd := range e.holds {
			if hd.conn == conn {
				h.dropHoldMapLocked(e, holder, hd.token, "disconnect")
			}
		}
	}
	var subs []*subscription
	for id, s := range h.subs {
		if s.conn == conn {
			subs = append(subs, s)
			delete(h.subs, id)
		}
	}
	h.gcConnLocked(conn)
	h.mu.Unlock()
	for _, s := range subs {
		h.endSubscription(s)
	}
}

// connBegin registers an operation on conn, enforcing its hold limit.
func (h *Host) connBegin(conn string, holding bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := h.conns[conn]
	if cs == nil {
		cs = &connState{}
		h.conns[conn] = cs
	}
	if holding && cs.holds >= h.o.MaxHoldsPerConn {
		return &api.Error{Kind: api.KindLimitExceeded, Msg: "too many holds on this connection",
			Data: map[string]any{"limit": "holds", "max": h.o.MaxHoldsPerConn}}
	}
	cs.inflight++
	return nil
}

// connEnd ends an operation begun with connBegin.
func (h *Host) connEnd(conn string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cs := h.conns[conn]; cs != nil {
		cs.inflight--
		h.gcConnLocked(conn)
	}
}

func (h *Host) gcConnLocked(conn string) {
	if cs := h.conns[conn]; cs != nil && cs.closed && cs.inflight == 0 && cs.holds <= 0 && cs.subs <= 0 {
		delete(h.conns, conn)
	}
}

func holderIDs(e *entry) []string {
	out := make([]string, 0, len(e.holds))
	for id := range e.holds {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
