package proc

import "sync"

// Bounds of the probe cache.
const (
	maxLivePidfds = 1024 // pidfds kept for identities seen alive
	maxGone       = 8192 // final verdicts remembered
	staleSweeps   = 16   // a live entry unused this many sweeps may be evicted
)

// cache remembers what sweeps learned. Its lock is a leaf: nothing else is
// locked while it is held.
var cache = probeCache{live: map[Identity]*liveEntry{}, gone: map[Identity]State{}}

type probeCache struct {
	sync.Mutex
	sweep uint64
	live  map[Identity]*liveEntry
	gone  map[Identity]State
}

type liveEntry struct {
	h    handle
	used uint64
}

// resolveLocked answers what it can without reading /proc: boot changes,
// final verdicts, and cached live identities (one poll over their pidfds;
// a readable pidfd means that process exited and sends it to the slow
// path). It returns the indexes left to probe.
func (c *probeCache) resolveLocked(ids []Identity, boot string, out []State) []int {
	var pending, polled []int
	var hs []handle
	for i, id := range ids {
		switch {
		case id.PID > 0 && id.BootID != "" && boot != "" && id.BootID != boot:
			out[i] = BootChanged
		case c.gone[id] != 0:
			out[i] = c.gone[id]
		case c.live[id] != nil:
			e := c.live[id]
			e.used = c.sweep
			polled = append(polled, i)
			hs = append(hs, e.h)
		default:
			pending = append(pending, i)
		}
	}
	if len(hs) == 0 {
		return pending
	}
	exited, err := pollExited(hs, 0)
	for k, i := range polled {
		if err == nil && !exited[k] {
			out[i] = Alive
			continue
		}
		c.dropLocked(ids[i])
		pending = append(pending, i)
	}
	return pending
}

// probeSlowLocked probes id through /proc/<pid>/stat. Alive identities get a
// pidfd opened BEFORE the check, so the pidfd is known to name the process
// that was checked; gone ones are remembered.
func (c *probeCache) probeSlowLocked(r *statReader, id Identity, boot string) State {
	if c.live[id] != nil {
		return Alive // a duplicate in this sweep, verified a moment ago
	}
	if st := c.gone[id]; st != 0 {
		return st
	}
	var h handle
	h.fd = -1
	if id.PID > 0 && (id.BootID == "" || id.BootID == boot) && havePidfd() && c.roomLocked() {
		var absent bool
		if h, absent = pidfdHandle(id); absent {
			return c.goneLocked(id, PidAbsent)
		}
	}
	st := probeWithBoot(r, id, boot)
	switch {
	case st == Alive && h.fd >= 0:
		c.live[id] = &liveEntry{h: h, used: c.sweep}
		return st
	case st.Gone():
		c.goneLocked(id, st)
	}
	h.close()
	return st
}

func (c *probeCache) goneLocked(id Identity, st State) State {
	if len(c.gone) >= maxGone {
		clear(c.gone)
	}
	c.gone[id] = st
	return st
}

// roomLocked reports whether another pidfd may be kept, evicting entries
// unused for staleSweeps sweeps when full.
func (c *probeCache) roomLocked() bool {
	if len(c.live) < maxLivePidfds {
		return true
	}
	for id, e := range c.live {
		if c.sweep-e.used >= staleSweeps {
			c.dropLocked(id)
		}
	}
	return len(c.live) < maxLivePidfds
}

func (c *probeCache) dropLocked(id Identity) {
	if e := c.live[id]; e != nil {
		e.h.close()
		delete(c.live, id)
	}
}
