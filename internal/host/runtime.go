package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// defaultAccount is the account of a session whose pinned env is its
// profile's (accounts are not configurable yet).
const defaultAccount = "default"

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
}

// accountOf is the account a record's session runs under: the default
// one when its pinned env is the profile's, else one named by the env's
// digest (two envs never share a process: a process holds one account's
// credentials).
func accountOf(rec store.Record, prov Provider) string {
	if len(rec.Env) == 0 && len(prov.Env) == 0 || maps.Equal(rec.Env, prov.Env) {
		return defaultAccount
	}
	keys := slices.Sorted(maps.Keys(rec.Env))
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\x00", k, rec.Env[k])
	}
	return "env-" + hex.EncodeToString(h.Sum(nil)[:6])
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
	env = append(env, EnvRuntimeID+"="+rt.id)
	child, err := proc.Spawn(proc.Spec{
		Path: prov.Command[0], Args: prov.Command[1:], Env: env, Dir: rec.Cwd,
		// The runtime's tags name the runtime: a crashed run's runtime is
		// reaped at startup as a tagged process no lease names.
		Tags:        proc.Tags{SessionID: rt.id, Fence: 1, StateID: h.st.StateID},
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
	if err := proto.Handshake(ctx); err != nil {
		proto.BeginStop()
		return &api.Error{Kind: api.KindProviderFailed, Msg: fmt.Sprintf("runtime %s: provider %s", rt.id, rt.key.profile),
			Err: err, Data: map[string]any{"cause": err.Error(), "stderrTail": child.StderrTail(), "runtimeId": rt.id}}
	}
	return nil
}

// EnvRuntimeID is set in a runtime's process (and inherited by its tree).
const EnvRuntimeID = "SESSIOND_RUNTIME_ID"

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
	if last && closing {
		h.evictRuntime(rt, "shutdown") // nobody else would stop it now
	}
}

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
	rt.mu.Unlock()
	h.evictRuntime(rt, "idle")
}

// Step names of a runtime's teardown, in order.
const (
	StepStopRuntime   = "stop-runtime"
	StepDrainRuntime  = "drain-runtime"
	StepForgetRuntime = "forget-runtime"
)

// runtimeStep is one step of a runtime's teardown.
type runtimeStep struct {
	name string
	run  func(ctx context.Context) error
}

// runtimePlan is a runtime's teardown: the close ladder and its verdict,
// the drain of what the process still wrote, then the runtime leaves the
// map and lets go of its threads. The order is the property: the threads
// are free for another runtime only once the process is proven gone.
func (h *Host) runtimePlan(rt *sharedRuntime) []runtimeStep {
	return []runtimeStep{
		{StepStopRuntime, func(ctx context.Context) error { return h.stepStopRuntime(ctx, rt) }},
		{StepDrainRuntime, func(ctx context.Context) error { return rt.proto.Drain(ctx, 100*time.Millisecond) }},
		{StepForgetRuntime, func(ctx context.Context) error { h.forgetRuntime(rt); return nil }},
	}
}

// evictRuntime runs rt's teardown (its process first, then the tails of
// the sessions still bound: a runtime that died under them), logging each
// step. It leaves the map first, so a new hold starts a new runtime.
func (h *Host) evictRuntime(rt *sharedRuntime, why string) {
	rt.mu.Lock()
	if rt.tearing {
		rt.mu.Unlock()
		return
	}
	rt.tearing = true
	if rt.state != runtimeGone {
		rt.state = runtimeStopping
	}
	if rt.idle != nil {
		rt.idle.Stop()
		rt.idle = nil
	}
	proto := rt.proto
	rt.mu.Unlock()
	h.mu.Lock()
	if h.runtimes[rt.key] == rt {
		delete(h.runtimes, rt.key)
	}
	evicting := h.runtimeEvicting
	h.mu.Unlock()
	if evicting != nil {
		evicting(rt.id)
	}
	if proto != nil {
		proto.BeginStop()
	}
	start := time.Now()
	steps := h.runtimePlan(rt)
	for i, st := range steps {
		if st.name == StepForgetRuntime {
			h.endBoundSessions(rt) // each bound session's tail, before the threads are let go
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.stopTimeout())
		err := st.run(ctx)
		cancel()
		if err != nil {
			h.log.Error("runtime eviction failed", "runtime_id", rt.id, "step", st.name,
				"completed", stepNames(steps[:i]), "err", err)
			return
		}
	}
	h.log.Info("runtime evicted", "runtime_id", rt.id, "provider", rt.key.profile, "account", rt.key.account,
		"why", why, "ms", time.Since(start).Milliseconds())
}

func stepNames(s []runtimeStep) []string {
	out := make([]string, len(s))
	for i, st := range s {
		out[i] = st.name
	}
	return out
}

// stepStopRuntime runs the close ladder on the runtime's process.
func (h *Host) stepStopRuntime(ctx context.Context, rt *sharedRuntime) error {
	rt.mu.Lock()
	child, done := rt.child, rt.verdict != nil && rt.verdict.Root == proc.Exited
	rt.mu.Unlock()
	if child == nil || done {
		return nil
	}
	v := h.stopChild(ctx, child, h.o.Ladder)
	rt.mu.Lock()
	rt.verdict = &v
	rt.mu.Unlock()
	if v.Root != proc.Exited {
		return fmt.Errorf("%w: runtime %s pid %d is %s", ErrExitUnproven, rt.id, child.Identity().PID, v.Root)
	}
	if v.Tree != proc.Exited {
		h.log.Warn("runtime tree not proven gone; bounded cleanup takes it", "runtime_id", rt.id, "survivors", len(v.Survivors))
		h.cleanup.AddVerdict(proc.Tags{SessionID: rt.id, Fence: 1, StateID: h.st.StateID}, v)
	}
	return nil
}

// endBoundSessions gives every session still bound to rt (its process is
// gone) its tail, in session order: each through its own eviction, under
// its own lock.
func (h *Host) endBoundSessions(rt *sharedRuntime) {
	rt.mu.Lock()
	ids := slices.Sorted(maps.Keys(rt.sessions))
	bound := make([]*entry, 0, len(ids))
	for _, id := range ids {
		bound = append(bound, rt.sessions[id])
	}
	rt.mu.Unlock()
	for _, e := range bound {
		e.mu.Lock()
		h.mu.Lock()
		mine := e.rt == rt && !e.gone && (e.state == StateLive || e.state == StateExited)
		if mine && e.state == StateLive {
			e.state = StateExited
		}
		h.mu.Unlock()
		if mine {
			if _, err := h.evictLocked(context.Background(), e, evictExited); err != nil {
				h.scheduleRetryLocked(e, evictExited)
			}
		}
		e.mu.Unlock()
	}
}

// forgetRuntime lets go of rt: it leaves the map (if still there) and
// every thread it had loaded is free for another runtime.
func (h *Host) forgetRuntime(rt *sharedRuntime) {
	rt.mu.Lock()
	already := rt.state == runtimeGone
	rt.state = runtimeGone
	rt.mu.Unlock()
	if already {
		return
	}
	h.mu.Lock()
	if h.runtimes[rt.key] == rt {
		delete(h.runtimes, rt.key)
	}
	for th, owner := range h.loaded {
		if owner == rt {
			delete(h.loaded, th)
		}
	}
	h.mu.Unlock()
	close(rt.gone)
}

// watchRuntime learns the runtime's exit: when nobody asked it to stop,
// its sessions get their tails (evictRuntime).
func (h *Host) watchRuntime(rt *sharedRuntime, child *proc.Child) {
	defer h.wg.Done()
	<-child.Exited()
	ex := child.Exit()
	var code any
	if ex.Code != nil {
		code = *ex.Code
	}
	rt.mu.Lock()
	asked := rt.tearing
	rt.mu.Unlock()
	h.log.Info("runtime exited", "runtime_id", rt.id, "pid", child.Identity().PID, "code", code, "signal", ex.Signal, "expected", asked)
	if asked {
		return
	}
	h.evictRuntime(rt, "exited")
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

// stopRuntimes runs every shared runtime's teardown (shutdown), side by side.
func (h *Host) stopRuntimes() {
	h.mu.Lock()
	rts := slices.Collect(maps.Values(h.runtimes))
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, rt := range rts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-rt.ready:
			default:
				return // a start still running gives up on its own (h.starts is cancelled)
			}
			h.evictRuntime(rt, "shutdown")
		}()
	}
	wg.Wait()
}

// Runtimes lists the live shared runtimes by id (daemon.status.runtimes).
// PSSBytes stays 0: the PSS reader is not in proc yet.
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
		ri.RSSBytes, _ = proc.RSS(ri.PID)
		out = append(out, ri)
	}
	slices.SortFunc(out, func(a, b api.RuntimeInfo) int { return strings.Compare(a.RuntimeID, b.RuntimeID) })
	return out
}
