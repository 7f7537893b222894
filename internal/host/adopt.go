package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/store"
)

// Adopt rebuilds the map from a live upgrade's handoff, before Startup:
// each session's child is adopted around its inherited pipes (no spawn,
// no handshake, no thread resume), its adapter rebuilt from the paused
// state, its exit watched and its release clock armed at the handed-over
// time. Startup then leaves these sessions alone (their leases are live
// and their children are ours). Any error means the image cannot take
// over: the caller exits and the next start reaps as after a crash.
//
// Shared runtimes are adopted first (their process, pipes and adapter
// state, readers not started), then the sessions, each bound thread
// installed into its runtime; only then does each runtime's reader start
// (a line read before its thread is installed would be nobody's), its
// exit is watched and, when no session is on it, its release clock is
// armed at the handed-over time.
//
// Sessions are adopted side by side (adoptWorkers at a time): each waits
// on its own store reads, /proc and cgroup files, and the new image
// accepts only once all are adopted.
func (h *Host) Adopt(ctx context.Context, runtimes []HandoffRuntime, sessions []HandoffSession) error {
	rts := map[string]*adoptedRuntime{}
	for _, r := range runtimes {
		ar, err := h.adoptRuntime(r)
		if err != nil {
			return fmt.Errorf("adopt runtime %s: %w", r.ID, err)
		}
		if ar != nil {
			rts[r.ID] = ar
		}
	}
	err := h.adoptSessions(ctx, rts, sessions)
	for _, ar := range rts {
		h.syncRuntimeRecord(ar.rt) // the sessions adopted onto it
		ar.proto.Start()
		h.wg.Add(1)
		go h.watchRuntime(ar.rt, ar.rt.child)
		ar.rt.mu.Lock()
		if len(ar.rt.sessions) == 0 {
			in := h.o.IdleTimeout
			if ar.releaseAt != nil {
				in = max(ar.releaseAt.Sub(h.clock.Now()), 0)
			}
			h.armRuntimeInLocked(ar.rt, in)
		}
		n := len(ar.rt.sessions)
		ar.rt.mu.Unlock()
		h.log.Info("runtime adopted", "runtime_id", ar.rt.id, "provider", ar.rt.key.profile, "account", ar.rt.key.account,
			"pid", ar.rt.pid, "sessions", n)
	}
	return err
}

// adoptedRuntime is a runtime being adopted: its reader starts once its
// sessions are.
type adoptedRuntime struct {
	rt        *sharedRuntime
	proto     provider.AdoptedRuntime
	releaseAt *time.Time
}

// adoptRuntime rebuilds a handed-over runtime (nil, nil: its process
// exited since; its sessions are closed as after a crash).
func (h *Host) adoptRuntime(r HandoffRuntime) (*adoptedRuntime, error) {
	prov, ok := h.o.Providers[r.Provider]
	if !ok || prov.AdoptRuntime == nil {
		return nil, fmt.Errorf("provider %q is not configured or cannot adopt a shared runtime", r.Provider)
	}
	child, err := proc.Adopt(r.Child, h.o.Cgroups, nil, h.log)
	if errors.Is(err, proc.ErrChildGone) {
		h.log.Warn("handed-over runtime exited before adoption; its sessions are closed as after a crash",
			"runtime_id", r.ID, "pid", r.Child.PID, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	proto, err := prov.AdoptRuntime(provider.RuntimeOptions{In: child.Stdin(), Out: child.Stdout(),
		Logger: h.log.With("runtime_id", r.ID), RequestTimeout: h.o.RequestTimeout}, r.Adapter)
	if err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	close(ready)
	rt := &sharedRuntime{id: r.ID, key: runtimeKey{profile: r.Provider, account: r.Account}, ready: ready,
		gone: make(chan struct{}), state: runtimeLive, child: child, proto: proto, sessions: map[string]*entry{},
		startedAt: r.StartedAt, pid: r.Child.PID}
	if err := h.adoptRuntimeRecord(rt, child); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runtimes[rt.key] != nil {
		return nil, fmt.Errorf("two handed-over runtimes for %s/%s", rt.key.profile, rt.key.account)
	}
	h.runtimes[rt.key] = rt
	h.handedOver[rt.id] = true
	for _, th := range r.Loaded {
		h.loaded[th] = rt
	}
	return &adoptedRuntime{rt: rt, proto: proto, releaseAt: r.ReleaseAt}, nil
}

func (h *Host) adoptSessions(ctx context.Context, rts map[string]*adoptedRuntime, sessions []HandoffSession) error {
	work := make(chan HandoffSession)
	errs := make([]error, min(adoptWorkers(), len(sessions)))
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if errs[i] != nil {
					continue // drain: the image exits anyway
				}
				if err := ctx.Err(); err != nil {
					errs[i] = err
				} else if err := h.adoptOne(s, rts); err != nil {
					errs[i] = fmt.Errorf("adopt session %s: %w", s.ID, err)
				}
			}
		}()
	}
	for _, s := range sessions {
		work <- s
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// adoptWorkers is how many sessions Adopt adopts at a time.
func adoptWorkers() int { return 2 * runtime.GOMAXPROCS(0) }

func (h *Host) adoptOne(s HandoffSession, rts map[string]*adoptedRuntime) error {
	rec, err := h.record(s.ID)
	if err != nil {
		return err
	}
	if s.RuntimeID != "" {
		ar := rts[s.RuntimeID]
		if ar == nil {
			h.log.Warn("handed-over session's runtime exited before adoption; its session is closed as after a crash, reason provider_exited",
				"session_id", s.ID, "runtime_id", s.RuntimeID)
			h.markDiedInHandoff(s.ID)
			return nil
		}
		return h.adoptThread(s, rec, ar)
	}
	prov, ok := h.o.Providers[rec.Provider]
	if !ok || prov.Adopt == nil {
		return fmt.Errorf("provider %q is not configured or cannot adopt", rec.Provider)
	}
	lr, err := h.leases.Get(s.ID)
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if lr.Status != lease.Live || lr.Fence != s.Fence || lr.Owner == nil || lr.Owner.PID != s.Child.PID {
		return fmt.Errorf("lease (%s, fence %d) does not name the handed-over child %d at fence %d",
			lr.Status, lr.Fence, s.Child.PID, s.Fence)
	}
	e := newEntry(s.ID, StateLive)
	e.sink = h.j.Sink(s.ID)
	child, err := proc.Adopt(s.Child, h.o.Cgroups, h.onLimit(e, e.sink), h.log)
	if err != nil {
		e.sink.Close(context.Background())
	}
	if errors.Is(err, proc.ErrChildGone) {
		// It exited between the handoff and now: its session is closed
		// by reap-orphans as after a crash (pid-absent evidence).
		h.log.Warn("handed-over provider exited before adoption; its session is closed as after a crash, reason provider_exited",
			"session_id", s.ID, "pid", s.Child.PID, "err", err)
		h.markDiedInHandoff(s.ID)
		return nil
	}
	if err != nil {
		return err
	}
	e.rec, e.token, e.tailDone, e.child = rec, lr.Owner.SpawnToken, map[string]bool{}, child
	a, err := prov.Adopt(h.adapterOptions(e, child, s.Fence, s.ThreadID), s.Adapter)
	if err != nil {
		return err
	}
	e.adapter = a
	h.mu.Lock()
	defer h.mu.Unlock()
	e.fence, e.pid, e.threadID, e.stopper = s.Fence, s.Child.PID, s.ThreadID, a
	h.sessions[s.ID] = e
	h.handedOver[s.ID] = true
	h.armMapLocked(e, max(s.ReleaseAt.Sub(h.clock.Now()), 0))
	h.wg.Add(1)
	go h.watch(e, child, a.Done())
	h.log.Info("session adopted", "session_id", s.ID, "fence", s.Fence, "pid", s.Child.PID,
		"thread_id", s.ThreadID, "unparsed_bytes", len(s.Adapter.Unparsed), "release_at", s.ReleaseAt)
	return nil
}

// adoptThread adopts a session on a shared runtime: its thread's adapter
// is installed into the adopted runtime, and the session bound to it.
func (h *Host) adoptThread(s HandoffSession, rec store.Record, ar *adoptedRuntime) error {
	lr, err := h.leases.Get(s.ID)
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	rt := ar.rt
	if lr.Status != lease.Live || lr.Fence != s.Fence || lr.Owner == nil || lr.Owner.PID != rt.pid {
		return fmt.Errorf("lease (%s, fence %d) does not name runtime %s's process %d at fence %d",
			lr.Status, lr.Fence, rt.id, rt.pid, s.Fence)
	}
	e := newEntry(s.ID, StateLive)
	e.sink = h.j.Sink(s.ID)
	th, err := ar.proto.AdoptThread(provider.Options{
		Cwd: rec.Cwd, ThreadID: s.ThreadID, Emit: e.sink.Append, Logger: h.log.With("session_id", s.ID, "runtime_id", rt.id),
		RequestTimeout: h.o.RequestTimeout, InterruptTimeout: h.o.StepTimeout,
		RequestIDPrefix: fmt.Sprintf("f%d-", s.Fence),
	}, s.Adapter.State)
	if err != nil {
		e.sink.Close(context.Background())
		return err
	}
	e.rec, e.token, e.tailDone, e.adapter = rec, lr.Owner.SpawnToken, map[string]bool{}, th
	rt.mu.Lock()
	rt.sessions[s.ID] = e
	rt.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	e.fence, e.pid, e.threadID, e.stopper, e.rt = s.Fence, rt.pid, s.ThreadID, th, rt
	h.sessions[s.ID] = e
	h.handedOver[s.ID] = true
	h.armMapLocked(e, max(s.ReleaseAt.Sub(h.clock.Now()), 0))
	h.log.Info("session adopted", "session_id", s.ID, "fence", s.Fence, "pid", rt.pid, "runtime_id", rt.id,
		"thread_id", s.ThreadID, "release_at", s.ReleaseAt)
	return nil
}

// markDiedInHandoff records that id's handed-over process exited before
// it could be adopted: startup's tail for it says provider_exited.
func (h *Host) markDiedInHandoff(id string) {
	h.mu.Lock()
	h.diedInHandoff[id] = true
	h.mu.Unlock()
}

// adoptedMapLocked reports whether id (a session or a shared runtime) was
// adopted from a handoff (Startup must neither reap its process nor close
// its open turn). Needs the map lock.
//
// A session or runtime adopted in this process stays adopted once its
// own teardown ended it and left the map: a handed-over child that died
// at once (a zombie the new image still reaps) is torn down by its watch,
// which may run while Startup's reap-orphans walks the leases it listed
// before; that pass must not write a second tail (daemon_restart) for it.
func (h *Host) adoptedMapLocked(id string) bool {
	if h.handedOver[id] {
		return true
	}
	if e := h.sessions[id]; e != nil && (e.child != nil || e.rt != nil) {
		return true
	}
	for _, rt := range h.runtimes {
		if rt.id == id {
			return true
		}
	}
	return false
}

func (h *Host) adopted(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.adoptedMapLocked(id)
}
