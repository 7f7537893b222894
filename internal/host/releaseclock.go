package host

import (
	"context"
	"time"
)

// armMapLocked starts (or restarts) e's release clock. Needs the map lock.
func (h *Host) armMapLocked(e *entry, d time.Duration) {
	if e.idle != nil {
		e.idle.Stop()
	}
	at := h.clock.Now().Add(d)
	e.releaseAt = &at
	var t Timer
	t = h.clock.AfterFunc(d, func() {
		// t is assigned under the map lock, which the caller holds: a
		// clock that fires at once (d ≈ 0) must not read it before.
		h.mu.Lock()
		self := t
		h.mu.Unlock()
		h.releaseClockFired(e, self)
	})
	e.idle = t
}

// disarmMapLocked cancels e's release clock (and any eviction retry). Needs the map lock.
func (h *Host) disarmMapLocked(e *entry) {
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
	if e.retry > 0 || e.state == StateExited {
		h.beginStopMapLocked(e)
		h.mu.Unlock()
		e.mu.Lock()
	} else {
		h.mu.Unlock()
		if !e.mu.TryLock() {
			h.mu.Lock()
			if e.idle == t && !e.gone && !h.closing {
				h.log.Debug("release clock re-armed: session in use", "session_id", e.id)
				h.armMapLocked(e, h.o.IdleTimeout)
			}
			h.mu.Unlock()
			return
		}
	}
	defer e.mu.Unlock()
	h.mu.Lock()
	retrying, exited := e.retry > 0, e.state == StateExited
	cause := evictIdle
	switch {
	case exited:
		cause = evictExited
	case retrying:
		cause = e.retryWhy
	}
	// Holds keep a loaded child, but not one that is already gone.
	stale := e.gone || e.idle != t || (e.state != StateLive && !exited) || h.closing || (len(e.holds) > 0 && !exited)
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
		h.armMapLocked(e, h.o.IdleTimeout)
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
	if e.gone || (len(e.holds) > 0 && e.state != StateExited) {
		return // a hold keeps the loaded child; its next close retries
	}
	e.retry++
	e.retryWhy = cause
	d := time.Second << min(e.retry-1, 6)
	d = min(d, time.Minute)
	h.log.Warn("eviction will be retried", "session_id", e.id, "attempt", e.retry, "in", d)
	retry := e.retry
	h.armMapLocked(e, d)
	e.retry, e.retryWhy = retry, cause
}
