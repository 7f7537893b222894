package host

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/proc"
)

// A runtime's teardown (runtimePlan) and what starts it: its release
// clock, its own exit (watchRuntime), shutdown and a live upgrade.

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
		h.cleanup.AddVerdict(rt.tags(h.st.StateID), v)
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

// forgetRuntime lets go of rt: its store record is deleted (its tree is
// proven gone), it leaves the map (if still there) and every thread it
// had loaded is free for another runtime.
func (h *Host) forgetRuntime(rt *sharedRuntime) {
	rt.mu.Lock()
	already := rt.state == runtimeGone
	rt.state = runtimeGone
	v := rt.verdict
	rt.mu.Unlock()
	if already {
		return
	}
	h.deleteRuntimeRecord(rt, v)
	h.mu.Lock()
	if h.runtimes[rt.key] == rt {
		delete(h.runtimes, rt.key)
	}
	for th, owner := range h.loaded {
		if owner == rt {
			delete(h.loaded, th)
		}
	}
	for th, rts := range h.stale {
		delete(rts, rt)
		if len(rts) == 0 {
			delete(h.stale, th)
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
