package host

import "time"

// A runtime's release clock: armed when its last session is gone and no
// turn runs; when it fires on a runtime still serving nobody, the runtime
// is claimed and torn down.

// armRuntimeLocked starts rt's release clock (idle_timeout). Needs the runtime lock.
func (h *Host) armRuntimeLocked(rt *sharedRuntime) { h.armRuntimeInLocked(rt, h.o.IdleTimeout) }

// armRuntimeInLocked starts rt's release clock to fire in d (a live
// upgrade hands the remaining time over). Needs the runtime lock.
func (h *Host) armRuntimeInLocked(rt *sharedRuntime, d time.Duration) {
	if rt.idle != nil {
		rt.idle.Stop()
	}
	rt.idleAt = h.clock.Now().Add(d)
	var t Timer
	t = h.clock.AfterFunc(d, func() {
		rt.mu.Lock()
		self := t
		rt.mu.Unlock()
		h.runtimeClockFired(rt, self)
	})
	rt.idle = t
	h.log.Debug("runtime release clock armed", "runtime_id", rt.id, "in", d)
}

// runtimeClockFired stops rt if it still serves nobody. A session bound
// to it (held, or with a running turn) keeps it.
func (h *Host) runtimeClockFired(rt *sharedRuntime, t Timer) {
	rt.mu.Lock()
	if rt.idle != t || rt.state != runtimeLive || len(rt.sessions) > 0 {
		rt.mu.Unlock()
		return
	}
	rt.idle = nil
	h.claimIdleLocked(rt)
	rt.mu.Unlock()
	h.mu.Lock()
	decided := h.runtimeIdleDecided
	h.mu.Unlock()
	if decided != nil {
		decided(rt.id)
	}
	h.evictRuntime(rt, "idle")
}

// claimIdleLocked marks rt stopping and takes it out of the map in the
// step that found it serving nobody: a hold racing the decision either
// bound first (and keeps the runtime) or starts a new one; it never binds
// to a runtime whose teardown is about to run. Needs the runtime lock
// (the map lock is taken after it).
func (h *Host) claimIdleLocked(rt *sharedRuntime) {
	rt.state = runtimeStopping
	h.mu.Lock()
	if h.runtimes[rt.key] == rt {
		delete(h.runtimes, rt.key)
	}
	h.mu.Unlock()
}
