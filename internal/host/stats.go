package host

// counters are daemon.stats' host figures, guarded by the map lock.
type counters struct {
	holds, releases, starts, sends, orphans int
	evictions                               map[string]int // "<cause>/<outcome>"
}

// count applies f to the counters under the map lock.
func (h *Host) count(f func(c *counters)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.stats)
}

var causeNames = map[evictCause]string{
	evictClosed: "closed", evictIdle: "idle", evictExited: "exited",
	evictShutdown: "shutdown", evictStartFailed: "start_failed",
}

func (c *counters) evicted(cause evictCause, outcome string) {
	if c.evictions == nil {
		c.evictions = map[string]int{}
	}
	c.evictions[causeNames[cause]+"/"+outcome]++
}

// Stats is daemon.stats' host counters.
func (h *Host) Stats() map[string]any {
	stale := h.staleRuntimeRecords() // store reads: before the map lock
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := map[string]int{}
	for k, v := range h.stats.evictions {
		ev[k] = v
	}
	js := h.j.Stats()
	return map[string]any{
		"holds":          h.stats.holds,
		"releases":       h.stats.releases,
		"providerStarts": h.stats.starts,
		"sends":          h.stats.sends,
		"orphansReaped":  h.stats.orphans,
		"evictions":      ev,
		"liveSessions":   len(h.sessions),
		"subscriptions":  len(h.subs),
		"cleanupPending": h.cleanup.Pending(),
		"journal":        js,
		// staleRuntimeRecords: the runtime records no runtime of this
		// daemon is (ctl doctor's runtime-records check).
		"staleRuntimeRecords": stale,
	}
}
