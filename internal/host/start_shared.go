package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/store"
)

// startSharedLocked binds a session of a shared profile to its account's
// runtime (starting it when none runs), waits until no other runtime has
// the session's thread loaded, starts or resumes the thread in it and
// commits the lease with the runtime's process as its owner. On failure
// the session's teardown runs (the runtime is not touched). Needs the
// session lock; the lease is acquired.
func (h *Host) startSharedLocked(ctx context.Context, e *entry, prov Provider, grant lease.Grant) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.o.StartTimeout)
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	defer context.AfterFunc(h.starts, func() { cancelCause(context.Cause(h.starts)) })()

	e.sink = h.j.Sink(e.id)
	fail := func(cause error) error {
		if _, eerr := h.evictLocked(context.Background(), e, evictStartFailed); eerr != nil {
			h.log.Error("teardown after failed start", "session_id", e.id, "err", eerr)
			h.scheduleRetryLocked(e, evictStartFailed)
		}
		h.log.Warn("provider failed to start", "session_id", e.id, "provider", e.rec.Provider, "err", cause)
		var ae *api.Error
		if errors.As(cause, &ae) && ae.Kind == api.KindThreadBusy {
			return ae
		}
		data := map[string]any{"stderrTail": "", "cause": cause.Error()}
		if errors.As(cause, &ae) && ae.Data != nil {
			data = ae.Data
		}
		return &api.Error{Kind: api.KindProviderFailed, Msg: fmt.Sprintf("session %s: provider %s", e.id, e.rec.Provider),
			Err: cause, Data: data}
	}

	spawned := time.Now()
	rt, err := h.bindRuntime(ctx, e, prov)
	acq := map[string]any{"fence": grant.Fence}
	if grant.Evidence != nil {
		acq["deathEvidence"] = grant.Evidence
	}
	if rt != nil {
		acq["runtimeId"] = rt.id
	}
	e.sink.Append(event.New(event.LeaseAcquired, "", acq))
	if err != nil {
		return fail(err)
	}
	h.mu.Lock()
	e.rt, e.pid = rt, rt.pid
	e.cgroup = rt.child.Cgroup() // the runtime's: one cgroup per runtime, shared by its sessions
	h.mu.Unlock()
	if err := h.awaitThreadFree(ctx, e.rec.ThreadID, rt); err != nil {
		return fail(err)
	}
	th := rt.proto.Thread(provider.Options{
		Cwd: e.rec.Cwd, ThreadID: e.rec.ThreadID, Emit: h.emitter(e, e.sink), Logger: h.log.With("session_id", e.id, "runtime_id", rt.id),
		RequestTimeout: h.o.RequestTimeout, InterruptTimeout: h.o.StepTimeout,
		RequestIDPrefix: fmt.Sprintf("f%d-", grant.Fence), // unique per incarnation of the session's thread
	})
	e.adapter = th
	h.mu.Lock()
	e.stopper = th
	h.mu.Unlock()
	res, err := th.Start(ctx)
	if err != nil {
		return fail(err)
	}
	ready := time.Since(spawned)
	h.mu.Lock()
	h.loaded[res.ThreadID] = rt // until its process exits, also once detached
	h.mu.Unlock()
	id := rt.child.Identity()
	if err := h.leases.Commit(e.id, grant.Fence, grant.SpawnToken, lease.Owner{
		PID: id.PID, StartTicks: id.StartTicks, BootID: id.BootID, SpawnToken: grant.SpawnToken}); err != nil {
		return fail(fmt.Errorf("commit lease: %w", err))
	}
	if res.ThreadID != e.rec.ThreadID || e.rec.ThreadFresh {
		if err := h.st.UpdateRecord(e.id, func(r *store.Record) { r.ThreadID, r.ThreadFresh = res.ThreadID, false }); err != nil {
			return fail(fmt.Errorf("record thread id: %w", err))
		}
		e.rec.ThreadID, e.rec.ThreadFresh = res.ThreadID, false
	}
	if _, err := e.sink.Commit(ctx, event.New(event.ProviderStarted, "", map[string]any{
		"pid": id.PID, "threadId": res.ThreadID, "resumed": res.Resumed, "runtimeId": rt.id})); err != nil {
		return fail(fmt.Errorf("journal: %w", err))
	}
	h.mu.Lock()
	e.state = StateLive
	e.threadID = res.ThreadID
	h.stats.starts++
	h.mu.Unlock()
	h.log.Info("provider started", "session_id", e.id, "fence", grant.Fence, "pid", id.PID, "runtime_id", rt.id,
		"thread_id", res.ThreadID, "resumed", res.Resumed, "ready_us", ready.Microseconds())
	return nil
}
