package proc

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/budget"
)

// Clock is the time source of Cleanup, injected so tests drive it.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled call of a Clock.
type Timer interface {
	Stop() bool
}

// RealClock is the wall clock.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// CleanupSchedule is when, after Add, a tree not proven gone is re-laddered.
var CleanupSchedule = []time.Duration{5 * time.Second, 30 * time.Second, 120 * time.Second}

// reapFunc re-ladders a tree; a field so tests can stand in for it.
type reapFunc func(ctx context.Context, log *slog.Logger, survivors []Identity, tags Tags, l Ladder) Verdict

func reapSurvivors(ctx context.Context, log *slog.Logger, survivors []Identity, tags Tags, l Ladder) Verdict {
	return reapTree(ctx, log, Identity{}, survivors, tags, l)
}

// Cleanup re-ladders trees not proven gone on a bounded schedule, then logs
// their last verdict and drops them. Nothing ever waits on it, and it keeps
// no goroutine per entry: one timer each, whose callback runs the ladder.
type Cleanup struct {
	l     Ladder
	clock Clock
	log   *slog.Logger
	reap  reapFunc

	mu       sync.Mutex // guards the fields below
	next     uint64
	entries  map[uint64]*cleanupEntry
	closed   bool
	inflight int            // entries whose attempt runs now (not in entries)
	running  sync.WaitGroup // timer callbacks in flight
}

type cleanupEntry struct {
	tags      Tags
	cg        *sessionCgroup // cgroup mode: the cgroup still populated
	survivors []Identity
	added     time.Time
	attempt   int // index into CleanupSchedule of the next attempt
	timer     Timer
}

// NewCleanup returns an empty cleanup with ladder l on clock (nil: real time).
func NewCleanup(l Ladder, clock Clock, log *slog.Logger) *Cleanup {
	if clock == nil {
		clock = RealClock()
	}
	return &Cleanup{l: l, clock: clock, log: orDiscard(log), reap: reapSurvivors,
		entries: map[uint64]*cleanupEntry{}}
}

// Add takes a tree not proven gone: its survivors and the session's tags.
func (c *Cleanup) Add(tags Tags, survivors []Identity) { c.add(tags, survivors, nil) }

// AddVerdict takes the tree of a verdict whose Tree is not Exited: in
// cgroup mode its cgroup (re-laddered by cgroup.kill), else its survivors.
func (c *Cleanup) AddVerdict(tags Tags, v Verdict) { c.add(tags, v.Survivors, v.cgroup) }

func (c *Cleanup) add(tags Tags, survivors []Identity, cg *sessionCgroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.log.Warn("cleanup closed: tree dropped", tags.attr(),
			"fence", tags.Fence, "survivors", len(survivors))
		return
	}
	c.next++
	e := &cleanupEntry{tags: tags, cg: cg, survivors: append([]Identity(nil), survivors...), added: c.clock.Now()}
	c.entries[c.next] = e
	c.scheduleLocked(c.next, e)
	c.log.Info("cleanup scheduled", tags.attr(), "fence", tags.Fence,
		"survivors", len(survivors))
}

// scheduleLocked arms e's timer for its next attempt, relative to when it
// was added.
func (c *Cleanup) scheduleLocked(key uint64, e *cleanupEntry) {
	d := max(e.added.Add(CleanupSchedule[e.attempt]).Sub(c.clock.Now()), 0)
	e.timer = c.clock.AfterFunc(d, func() { c.fire(key) })
}

func (c *Cleanup) fire(key uint64) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok || c.closed {
		c.mu.Unlock()
		return
	}
	delete(c.entries, key) // in flight: CloseAll does not see it twice
	c.inflight++
	c.running.Add(1)
	c.mu.Unlock()
	defer c.running.Done()

	v := c.attempt(context.Background(), e)
	e.attempt++
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	switch {
	case v.Tree == Exited:
		c.log.Info("cleanup: tree gone", e.tags.attr(), "fence", e.tags.Fence,
			"attempt", e.attempt)
	case e.attempt >= len(CleanupSchedule) || c.closed:
		c.log.Warn("cleanup: giving up on tree", e.tags.attr(),
			"fence", e.tags.Fence, "tree", v.Tree.String(), "survivors", pids(v.Survivors),
			"attempt", e.attempt)
	default:
		e.survivors = v.Survivors
		c.entries[key] = e
		c.scheduleLocked(key, e)
	}
}

func (c *Cleanup) attempt(ctx context.Context, e *cleanupEntry) Verdict {
	ctx, cancel := context.WithTimeout(ctx, budget.Reap(budget.Ladder(c.l)))
	defer cancel()
	if e.cg != nil {
		return e.cg.reladder(ctx, c.l)
	}
	return c.reap(ctx, c.log, e.survivors, e.tags, c.l)
}

// CloseAll stops every timer, waits for attempts in flight, and makes one
// last attempt at each pending tree (logging what it proves). Later Adds are
// dropped with a warning.
func (c *Cleanup) CloseAll(ctx context.Context) {
	c.mu.Lock()
	c.closed = true
	pending := make([]*cleanupEntry, 0, len(c.entries))
	for key, e := range c.entries {
		e.timer.Stop()
		pending = append(pending, e)
		delete(c.entries, key)
	}
	c.mu.Unlock()
	c.running.Wait()
	for _, e := range pending {
		v := c.attempt(ctx, e)
		c.log.Info("cleanup: last attempt at shutdown", e.tags.attr(),
			"fence", e.tags.Fence, "tree", v.Tree.String(), "survivors", pids(v.Survivors))
	}
}

// Pending is the number of trees still scheduled (attempts in flight count).
func (c *Cleanup) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries) + c.inflight
}

func pids(ids []Identity) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = id.PID
	}
	return out
}
