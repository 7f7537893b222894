package host

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/store"
)

// A runtime is one provider process. A session of a profile with
// processes = "account" (Provider.Shared) runs as a thread on its
// account's runtime, shared with the account's other live sessions; a
// session of any other profile has a process of its own (the entry's
// child: a runtime of one, with today's teardown).
//
// Runtimes live in their own map (Host.runtimes, keyed by (profile,
// account)); a session entry points to its runtime (entry.rt). Lock order:
// session lock, then runtime lock, then map lock. A runtime lock is never
// held while a session lock is taken: the runtime's own teardown snapshots
// its sessions and takes their locks one by one with the runtime unlocked.

// runtimeKey names a runtime: (profile, account).
type runtimeKey struct{ profile, account string }

// runtimeState is where a runtime is in its life.
type runtimeState int

const (
	runtimeStarting runtimeState = iota
	runtimeLive
	runtimeStopping // its own eviction runs (idle, shutdown) or it exited: no new session binds
	runtimeGone
)

var runtimeStateNames = [...]string{"starting", "live", "stopping", "gone"}

func (s runtimeState) String() string { return runtimeStateNames[s] }

// sharedRuntime is one shared provider process (a runtime).
type sharedRuntime struct {
	id  string // r_…
	key runtimeKey

	ready chan struct{} // closed when the start finished (startErr says how)
	gone  chan struct{} // closed once the process is proven exited and the runtime forgotten

	mu sync.Mutex // runtime lock: after a session lock, before the map lock
	// Guarded by mu.
	state     runtimeState
	startErr  error
	child     *proc.Child
	proto     provider.Runtime
	sessions  map[string]*entry // bound sessions (holding a thread on it)
	idle      Timer             // the runtime's release clock, nil when not armed
	idleAt    time.Time         // when idle fires
	verdict   *proc.Verdict
	tearing   bool // its teardown began (the daemon asked it to stop, or it exited)
	startedAt time.Time
	pid       int
	// recycling: a recycle runs (switch_recycle.go); waiters are the
	// sessions whose queued switch waits for it.
	recycling bool
	waiters   map[string]bool

	// recMu orders the writes of the runtime's store record (taken
	// before mu); recorded: the record is written and not yet deleted.
	recMu    sync.Mutex
	recorded bool // guarded by recMu
}

// shared reports whether prov's sessions share a runtime per account.
func (p Provider) shared() bool { return p.Shared && p.NewRuntime != nil }

// bindRuntime returns the live runtime of e's account with e bound to it,
// starting it when none runs; a runtime that is stopping is replaced.
// Needs the session lock (never the runtime's).
func (h *Host) bindRuntime(ctx context.Context, e *entry, prov Provider) (*sharedRuntime, error) {
	key := runtimeKey{profile: e.rec.Provider, account: accountOf(e.rec, prov)}
	for {
		h.mu.Lock()
		if h.closing {
			h.mu.Unlock()
			return nil, fmt.Errorf("runtime %s/%s: %w", key.profile, key.account, errShuttingDown)
		}
		rt := h.runtimes[key]
		starter := rt == nil
		if starter {
			rt = &sharedRuntime{id: newID("r_"), key: key, ready: make(chan struct{}), gone: make(chan struct{}),
				sessions: map[string]*entry{}}
			h.runtimes[key] = rt
		}
		h.mu.Unlock()
		if starter {
			h.startRuntime(ctx, rt, e.rec, prov)
		}
		select {
		case <-rt.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("runtime %s: waiting for its start: %w", rt.id, context.Cause(ctx))
		}
		rt.mu.Lock()
		switch {
		case rt.startErr != nil:
			err := rt.startErr
			rt.mu.Unlock()
			return nil, err
		case rt.state == runtimeLive:
			rt.sessions[e.id] = e
			if rt.idle != nil {
				rt.idle.Stop()
				rt.idle = nil
			}
			rt.mu.Unlock()
			h.syncRuntimeRecord(rt) // before the session's thread starts
			return rt, nil
		}
		rt.mu.Unlock()
		// Stopping or gone: it left the map; the next round starts anew.
	}
}

// startRuntime spawns rt's process and does the handshake; on failure
// the runtime leaves the map and its child is stopped. It closes rt.ready.
func (h *Host) startRuntime(ctx context.Context, rt *sharedRuntime, rec store.Record, prov Provider) {
	err := h.spawnRuntime(ctx, rt, rec, prov)
	rt.mu.Lock()
	if err == nil {
		rt.state = runtimeLive
	} else {
		rt.startErr = err
		rt.state = runtimeStopping
	}
	rt.mu.Unlock()
	close(rt.ready)
	if err == nil {
		h.log.Info("runtime started", "runtime_id", rt.id, "provider", rt.key.profile, "account", rt.key.account, "pid", rt.pid)
		return
	}
	h.log.Warn("runtime failed to start", "runtime_id", rt.id, "provider", rt.key.profile, "err", err)
	h.mu.Lock()
	if h.runtimes[rt.key] == rt {
		delete(h.runtimes, rt.key)
	}
	h.mu.Unlock()
	if rt.child == nil {
		close(rt.gone)
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.evictRuntime(rt, "start_failed")
	}()
}

// spawnRuntime starts rt's child and its adapter's handshake.
func (h *Host) spawnRuntime(ctx context.Context, rt *sharedRuntime, rec store.Record, prov Provider) error {
	env := os.Environ()
	for k, v := range prov.Env {
		env = append(env, k+"="+v)
	}
	for k, v := range rec.Env {
		env = append(env, k+"="+v)
	}
	child, err := proc.Spawn(proc.Spec{
		Path: prov.Command[0], Args: prov.Command[1:], Env: env, Dir: rec.Cwd,
		// The runtime's tags name the runtime, not one of the sessions it
		// serves: a crashed run's runtime tree is reaped at startup by
		// them; its cgroup is named after it.
		Tags:        rt.tags(h.st.StateID),
		StderrBytes: 16 << 10,
		Logger:      h.log,
		Cgroups:     h.o.Cgroups,
	})
	if err != nil {
		return &api.Error{Kind: api.KindProviderFailed, Msg: fmt.Sprintf("runtime %s: provider %s", rt.id, rt.key.profile),
			Err: err, Data: map[string]any{"cause": err.Error(), "stderrTail": "", "runtimeId": rt.id}}
	}
	proto := prov.NewRuntime(provider.RuntimeOptions{In: child.Stdin(), Out: child.Stdout(),
		Logger: h.log.With("runtime_id", rt.id), RequestTimeout: h.o.RequestTimeout})
	rt.mu.Lock()
	rt.child, rt.proto, rt.pid, rt.startedAt = child, proto, child.Identity().PID, h.clock.Now().UTC()
	rt.mu.Unlock()
	h.wg.Add(1)
	go h.watchRuntime(rt, child)
	// The record, before any thread starts: a crash from here on leaves
	// the runtime named in the store (its teardown deletes the record).
	if err := h.putRuntimeRecord(rt, child); err != nil {
		proto.BeginStop()
		return &api.Error{Kind: api.KindProviderFailed, Msg: fmt.Sprintf("runtime %s: provider %s", rt.id, rt.key.profile),
			Err: err, Data: map[string]any{"cause": err.Error(), "stderrTail": "", "runtimeId": rt.id}}
	}
	if err := proto.Handshake(ctx); err != nil {
		proto.BeginStop()
		return &api.Error{Kind: api.KindProviderFailed, Msg: fmt.Sprintf("runtime %s: provider %s", rt.id, rt.key.profile),
			Err: err, Data: map[string]any{"cause": err.Error(), "stderrTail": child.StderrTail(), "runtimeId": rt.id}}
	}
	return nil
}

// EnvRuntimeID is set in a runtime's process (and inherited by its tree).
const EnvRuntimeID = proc.EnvRuntimeID

// tags are the env tags of rt's process tree: SESSIOND_RUNTIME_ID and
// SESSIOND_STATE_ID, no session's id (it serves many).
func (rt *sharedRuntime) tags(stateID string) proc.Tags {
	return proc.Tags{RuntimeID: rt.id, StateID: stateID}
}

// unbindLocked takes e off its runtime; when it was the last session the
// runtime's release clock is armed. Needs the session lock.
func (h *Host) unbindLocked(e *entry) {
	rt := e.rt
	if rt == nil {
		return
	}
	h.mu.Lock()
	closing := h.closing
	h.mu.Unlock()
	rt.mu.Lock()
	if rt.sessions[e.id] != e {
		rt.mu.Unlock()
		return
	}
	delete(rt.sessions, e.id)
	last := len(rt.sessions) == 0 && rt.state == runtimeLive
	if last && !closing {
		h.armRuntimeLocked(rt)
	}
	rt.mu.Unlock()
	h.syncRuntimeRecord(rt)
	if last && closing {
		h.evictRuntime(rt, "shutdown") // nobody else would stop it now
	}
}

// exited reports whether rt's process has exited. It takes no lock: an
// entry points to rt only once rt.ready is closed, after which rt.child
// is never written.
func (rt *sharedRuntime) exited() bool {
	if rt.child == nil {
		return true
	}
	select {
	case <-rt.child.Exited():
		return true
	default:
		return false
	}
}

// awaitThreadFree waits until no runtime but `to` has thread loaded: a
// thread has one writer (codex keeps it locked until the process that
// loaded it exits, even after thread/unsubscribe). A runtime that has it
// and is being recycled is waited for; one that still runs is
// thread_busy. Needs the session lock.
func (h *Host) awaitThreadFree(ctx context.Context, thread string, to *sharedRuntime) error {
	if thread == "" {
		return nil
	}
	for {
		h.mu.Lock()
		owner := h.loaded[thread]
		h.mu.Unlock()
		if owner == nil || owner == to {
			return nil
		}
		owner.mu.Lock()
		live := owner.state == runtimeLive || owner.state == runtimeStarting
		owner.mu.Unlock()
		if live {
			return &api.Error{Kind: api.KindThreadBusy,
				Msg:  fmt.Sprintf("thread %s is loaded by runtime %s", thread, owner.id),
				Data: map[string]any{"runtimeId": owner.id, "threadId": thread}}
		}
		h.log.Info("thread loaded by a runtime being recycled; waiting for it", "thread_id", thread, "runtime_id", owner.id)
		select {
		case <-owner.gone:
		case <-ctx.Done():
			return &api.Error{Kind: api.KindThreadBusy,
				Msg:  fmt.Sprintf("thread %s is still loaded by runtime %s", thread, owner.id),
				Err:  context.Cause(ctx),
				Data: map[string]any{"runtimeId": owner.id, "threadId": thread}}
		}
	}
}

// Runtimes lists the live shared runtimes by id (daemon.status.runtimes).
// RSSBytes and PSSBytes are summed over each runtime's process tree, read
// now: one pass over /proc for every runtime (proc.TreesMemory), then two
// small files per process; nothing is cached.
func (h *Host) Runtimes() []api.RuntimeInfo {
	h.mu.Lock()
	rts := slices.Collect(maps.Values(h.runtimes))
	h.mu.Unlock()
	out := make([]api.RuntimeInfo, 0, len(rts))
	for _, rt := range rts {
		rt.mu.Lock()
		if rt.state != runtimeLive {
			rt.mu.Unlock()
			continue
		}
		ri := api.RuntimeInfo{RuntimeID: rt.id, Provider: rt.key.profile, Account: rt.key.account, PID: rt.pid,
			Sessions: len(rt.sessions), StartedAt: rt.startedAt}
		bound := slices.Collect(maps.Keys(rt.sessions))
		rt.mu.Unlock()
		for _, id := range bound {
			if h.j.State(id).OpenTurn != "" {
				ri.TurnsRunning++
			}
		}
		out = append(out, ri)
	}
	pids := make([]int, len(out))
	for i, ri := range out {
		pids[i] = ri.PID
	}
	if mem, err := proc.TreesMemory(pids); err == nil {
		for i := range out {
			m := mem[out[i].PID]
			out[i].RSSBytes, out[i].PSSBytes = m.RSS, m.PSS
		}
	}
	slices.SortFunc(out, func(a, b api.RuntimeInfo) int { return strings.Compare(a.RuntimeID, b.RuntimeID) })
	return out
}
