package host

import (
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/store"
)

// State is where a session is in its lifecycle.
type State int

// Session states; the map only holds starting, live, exited and evicting
// entries. Exited is a loaded session whose child exited on its own (or
// whose failed start could not be torn down): a teardown is owed, and the
// wire shows it as evicting.
const (
	StateStored State = iota
	StateStarting
	StateLive
	StateExited
	StateEvicting
)

var stateNames = [...]string{"stored", "starting", "live", "exited", "evicting"}

func (s State) String() string { return stateNames[s] }

// entry is one session in the map.
type entry struct {
	id string
	mu sessionLock // session lock

	// Guarded by the map lock (written with both locks held where noted).
	state     State
	gone      bool // forgotten: a waiter must look the session up again
	holds     map[string]*hold
	idle      Timer // release clock, nil when not armed
	releaseAt *time.Time
	retry     int        // failed evictions in a row
	retryWhy  evictCause // the cause a retry evicts with
	pid       int
	cgroup    string // the live child's cgroup (cgroup mode)
	limitHit  string // the last limit code the live child's cgroup reported
	fence     uint64
	threadID  string
	// profile and account are what the loaded session runs under (set
	// at its start).
	profile, account string
	// successor, when set, takes e's place in the map the moment e is
	// forgotten (an account switch starts the session again at once: no
	// other caller may start it in between under the old record).
	successor *entry
	// pending mirrors rec.PendingSwitch != nil for the adapter's reader
	// (emitter), which cannot take the session lock.
	pending atomic.Bool
	// rt is the shared runtime the session's thread is on (nil: a process
	// of its own, e.child). Written with both locks held.
	rt *sharedRuntime
	// stopper is the live child's adapter, reachable without the session
	// lock: beginStopMapLocked cancels its writes so a teardown never waits
	// behind a send blocked on a provider that stopped reading.
	stopper provider.Adapter

	// Guarded by the session lock.
	rec      store.Record
	token    string
	child    *proc.Child
	adapter  provider.Adapter
	sink     *journal.Sink
	verdict  *proc.Verdict
	tailDone map[string]bool // eviction tail rows already written (idempotent retries)
	// leftBehind is closed when a step that outlived its deadline in an
	// earlier attempt returns; no new attempt starts before it has.
	leftBehind <-chan struct{}
}

// hold is one holder of a session.
type hold struct {
	conn  string
	token string
	ttl   Timer
	ttlAt time.Time // when ttl fires (zero: no ttl)
}

// connState tracks a connection's holds and subscriptions.
type connState struct {
	closed   bool
	inflight int // holds and attaches in progress
	holds    int
	subs     int
}

// newEntry is a map entry of id in state s, its lock free.
func newEntry(id string, s State) *entry {
	return &entry{id: id, mu: newSessionLock(), state: s, holds: map[string]*hold{}}
}

// lookup returns the map entry of id, or nil.
func (h *Host) lookup(id string) *entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[id]
}

// forgetLocked deletes e from the map iff it is still the map's entry for
// its id. Needs the session lock.
func (h *Host) forgetLocked(e *entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[e.id] == e {
		delete(h.sessions, e.id)
		if e.successor != nil {
			h.sessions[e.id] = e.successor
		}
	}
	e.successor = nil
	e.gone = true
	e.state = StateStored
	if e.idle != nil {
		e.idle.Stop()
		e.idle = nil
	}
	e.releaseAt = nil
	for _, hd := range e.holds {
		if hd.ttl != nil {
			hd.ttl.Stop()
		}
		if cs := h.conns[hd.conn]; cs != nil {
			cs.holds--
		}
	}
	e.holds = map[string]*hold{}
	e.stopper = nil
}

// beginStopMapLocked makes every write to e's child give up at once, and,
// while the child lives, every request waiting for its answer: the caller
// is about to tear the child down and must not wait for the session lock
// behind a blocked send. An exited child's pending answers are left for the
// reader (they may already be in the pipe). Needs the map lock.
func (h *Host) beginStopMapLocked(e *entry) {
	switch {
	case e.stopper == nil:
	case e.rt != nil && !e.rt.exited():
		// A thread of a shared runtime that goes on: its teardown still
		// talks to the provider (interrupt, unsubscribe); a write to the
		// shared stdin is bounded by its own timeout.
	case e.state == StateExited:
		e.stopper.CancelWrites()
	default:
		e.stopper.BeginStop()
	}
}

// loadedStateLocked is the state of a loaded entry whose start or teardown
// ends now with s: exited instead when its child is already gone. Needs the
// session lock.
func loadedStateLocked(e *entry, s State) State {
	if e.child != nil {
		select {
		case <-e.child.Exited():
			return StateExited
		default:
		}
	}
	return s
}
