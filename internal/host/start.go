package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/store"
)

// startLocked acquires the lease, spawns the provider child, starts or
// resumes its thread and commits the lease. On any failure nothing is left:
// no live lease, no process, no map entry. Needs the session lock.
func (h *Host) startLocked(ctx context.Context, e *entry) (err error) {
	rec, err := h.record(e.id)
	if err != nil {
		h.forgetLocked(e)
		return err
	}
	prov, ok := h.o.Providers[rec.Provider]
	if !ok {
		h.forgetLocked(e)
		return &api.Error{Kind: api.KindUnknownProvider, Msg: fmt.Sprintf("session %s: provider %q is no longer configured", e.id, rec.Provider),
			Data: map[string]any{"provider": rec.Provider, "known": h.Providers()}}
	}
	if rec.PendingSwitch != nil {
		// Queued behind a turn that ended while nobody had the session
		// live (a close, an eviction, a restart): applied now, as a stored
		// session's switch, before anything starts.
		if rec, err = h.applyStoredPendingLocked(ctx, rec, prov); err != nil {
			h.forgetLocked(e)
			return err
		}
	}
	h.mu.Lock()
	e.state, e.profile, e.account = StateStarting, rec.Provider, accountOf(rec, prov)
	h.mu.Unlock()
	e.rec = rec
	e.tailDone = map[string]bool{}

	grant, err := h.leases.Acquire(e.id)
	if err != nil {
		h.forgetLocked(e)
		return leaseError(e.id, err)
	}
	e.token = grant.SpawnToken
	h.mu.Lock()
	e.fence = grant.Fence
	h.mu.Unlock()
	if prov.shared() {
		return h.startSharedLocked(ctx, e, prov, grant)
	}
	e.sink = h.j.Sink(e.id)
	acq := map[string]any{"fence": grant.Fence}
	if grant.Evidence != nil {
		acq["deathEvidence"] = grant.Evidence
	}
	e.sink.Append(event.New(event.LeaseAcquired, "", acq))

	// Bounded by start_timeout alone (the caller leaving does not cancel
	// it), and cancelled by a shutdown.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.o.StartTimeout)
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	defer context.AfterFunc(h.starts, func() { cancelCause(context.Cause(h.starts)) })()

	// From here on a failure runs the same teardown as any eviction, so the
	// journal gets its tail and the lease is released.
	fail := func(cause error) error {
		child := e.child
		if _, eerr := h.evictLocked(context.Background(), e, evictStartFailed); eerr != nil {
			h.log.Error("teardown after failed start", "session_id", e.id, "err", eerr)
			h.scheduleRetryLocked(e, evictStartFailed)
		}
		// After the teardown: the child's exit is observed only once its
		// stderr was read to the end (or lingered), so the tail is whole.
		stderr := ""
		if child != nil {
			stderr = child.StderrTail()
		}
		h.log.Warn("provider failed to start", "session_id", e.id, "provider", rec.Provider, "err", cause)
		return &api.Error{Kind: api.KindProviderFailed, Msg: fmt.Sprintf("session %s: provider %s", e.id, rec.Provider),
			Err: cause, Data: map[string]any{"stderrTail": stderr, "cause": cause.Error()}}
	}

	spawned := time.Now()
	res, fresh, err := h.launchLocked(ctx, e, prov, grant.Fence, rec.ThreadID, "", nil)
	if errors.Is(err, provider.ErrThreadNotFound) {
		// The provider refused the resume at start and exits by itself: once
		// its process is proven gone, a fresh one starts a fresh thread.
		h.log.Warn("thread not found by provider; starting a fresh one", "session_id", e.id, "thread_id", rec.ThreadID, "err", err)
		if werr := h.awaitExitLocked(ctx, e); werr != nil {
			return fail(fmt.Errorf("%w (and the process did not exit: %w)", err, werr))
		}
		cause := err.Error()
		var nf *provider.NotFoundError
		if errors.As(err, &nf) {
			cause = nf.Cause
		}
		spawned = time.Now()
		if rec.ThreadFresh {
			// Minted here and never begun (no turn): nothing is lost, the
			// fresh thread takes the same id.
			res, fresh, err = h.launchLocked(ctx, e, prov, grant.Fence, "", rec.ThreadID, nil)
		} else {
			res, fresh, err = h.launchLocked(ctx, e, prov, grant.Fence, "", "", &event.ThreadReplacedData{OldThreadID: rec.ThreadID, Cause: cause})
		}
	}
	if err != nil {
		return fail(err)
	}
	ready := time.Since(spawned) // the child's own start, as the daemon saw it
	child := e.child
	id := child.Identity()
	if err := h.leases.Commit(e.id, grant.Fence, grant.SpawnToken, lease.Owner{
		PID: id.PID, StartTicks: id.StartTicks, BootID: id.BootID, SpawnToken: grant.SpawnToken}); err != nil {
		return fail(fmt.Errorf("commit lease: %w", err))
	}
	if isFresh := fresh != "" && res.ThreadID == fresh; res.ThreadID != rec.ThreadID || isFresh != rec.ThreadFresh {
		if err := h.st.UpdateRecord(e.id, func(r *store.Record) { r.ThreadID, r.ThreadFresh = res.ThreadID, isFresh }); err != nil {
			return fail(fmt.Errorf("record thread id: %w", err))
		}
		e.rec.ThreadID, e.rec.ThreadFresh = res.ThreadID, isFresh
	}
	if _, err := e.sink.Commit(ctx, event.New(event.ProviderStarted, "", map[string]any{
		"pid": id.PID, "threadId": res.ThreadID, "resumed": res.Resumed})); err != nil {
		return fail(fmt.Errorf("journal: %w", err))
	}
	h.mu.Lock()
	select {
	case <-e.adapter.Done():
		// The provider's stdout ended while the session started (after its
		// last answer): watch saw the entry starting and left it to us.
		// Checked under the map lock, as watch's outputEnded reads the
		// state: one of the two sees the other.
		h.mu.Unlock()
		return fail(fmt.Errorf("the provider's stdout ended before its session was live: %w", provider.ErrExited))
	default:
	}
	e.state = loadedStateLocked(e, StateLive)
	e.threadID = res.ThreadID
	h.stats.starts++
	h.mu.Unlock()
	h.log.Info("provider started", "session_id", e.id, "fence", grant.Fence, "pid", id.PID,
		"thread_id", res.ThreadID, "resumed", res.Resumed, "ready_us", ready.Microseconds())
	return nil
}

// launchLocked spawns the session's child for threadID (resume args when
// set; without one, a fresh thread's id when the protocol takes it: reuse,
// or one minted here, returned as fresh) with a fresh adapter, and starts
// its thread. Needs the session lock.
func (h *Host) launchLocked(ctx context.Context, e *entry, prov Provider, fence uint64, threadID, reuse string,
	replaces *event.ThreadReplacedData) (_ provider.StartResult, fresh string, _ error) {
	spec := h.spec(e.rec, prov, fence)
	spec.OnLimit = h.onLimit(e, e.sink)
	if threadID != "" && prov.ResumeArgs != nil {
		spec.Args = append(spec.Args, prov.ResumeArgs(threadID)...)
	}
	if threadID == "" && prov.FreshThread != nil {
		id, args, err := prov.FreshThread(reuse)
		if err != nil {
			return provider.StartResult{}, "", fmt.Errorf("mint thread id: %w", err)
		}
		fresh, spec.Args = id, append(spec.Args, args...)
	}
	child, err := proc.Spawn(spec)
	if err != nil {
		return provider.StartResult{}, "", err
	}
	e.child = child
	o := h.adapterOptions(e, child, fence, threadID)
	o.FreshThreadID, o.Replaces = fresh, replaces
	e.adapter = prov.New(o)
	h.mu.Lock()
	e.pid = child.Identity().PID
	e.cgroup, e.limitHit = child.Cgroup(), ""
	e.stopper = e.adapter
	h.mu.Unlock()
	h.wg.Add(1)
	go h.watch(e, child, e.adapter.Done())
	res, err := e.adapter.Start(ctx)
	return res, fresh, err
}

// adapterOptions are the options of the adapter over e's child.
func (h *Host) adapterOptions(e *entry, child *proc.Child, fence uint64, threadID string) provider.Options {
	return provider.Options{
		In: child.Stdin(), Out: child.Stdout(), Cwd: e.rec.Cwd, ThreadID: threadID,
		Emit: h.emitter(e, e.sink), Logger: h.log.With("session_id", e.id), RequestTimeout: h.o.RequestTimeout,
		OnThreadID: func(id string) { h.learnThread(e, child, id) },
		Stuck:      func() { h.stopStuck(e, child) }, InterruptTimeout: h.o.StepTimeout,
		RequestIDPrefix: fmt.Sprintf("f%d-", fence), // unique per child: the fence grows with each
	}
}

// outputEnded evicts e when its child's stdout ended while the child
// runs, unless the session is already being torn down (a drain closes
// stdout too) or no longer runs that child.
func (h *Host) outputEnded(e *entry, child *proc.Child) {
	select {
	case <-child.Exited():
		return
	default:
	}
	h.mu.Lock()
	live := e.pid == child.Identity().PID && e.state == StateLive
	if live {
		h.beginStopMapLocked(e) // a send blocked on it must not hold the lock
	}
	h.mu.Unlock()
	if !live {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.child != child || e.state != StateLive {
		return
	}
	h.log.Warn("provider closed its stdout but still runs; stopping it", "session_id", e.id, "pid", child.Identity().PID)
	if _, err := h.evictLocked(context.Background(), e, evictExited); err != nil {
		h.scheduleRetryLocked(e, evictExited)
	}
}

// stopStuck tears down a child that ignored an interrupt (its adapter
// already ended the turn), unless it is no longer the session's.
func (h *Host) stopStuck(e *entry, child *proc.Child) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.mu.Lock()
		if e.pid == child.Identity().PID && e.state == StateLive {
			h.beginStopMapLocked(e) // a send blocked on it must not hold the lock
		}
		h.mu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.child != child || e.state != StateLive {
			return
		}
		if _, err := h.evictLocked(context.Background(), e, evictUnresponsive); err != nil {
			h.scheduleRetryLocked(e, evictUnresponsive)
		}
	}()
}

// awaitExitLocked waits (bounded by ctx) for the child that refused to
// start to exit by itself, and drains what it wrote. Needs the session lock.
func (h *Host) awaitExitLocked(ctx context.Context, e *entry) error {
	select {
	case <-e.child.Exited():
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return e.adapter.Drain(ctx, provider.DefaultDrainQuiet)
}

// learnThread records a thread id the adapter learned after Start, or
// that the provider began the fresh thread it was given (from the reader
// goroutine: no session lock), unless child is no longer the session's.
func (h *Host) learnThread(e *entry, child *proc.Child, id string) {
	h.mu.Lock()
	current := e.pid == child.Identity().PID
	if current {
		e.threadID = id
	}
	h.mu.Unlock()
	if !current {
		return
	}
	if err := h.st.UpdateRecord(e.id, func(r *store.Record) { r.ThreadID, r.ThreadFresh = id, false }); err != nil {
		h.log.Error("record thread id", "session_id", e.id, "thread_id", id, "err", err)
		return
	}
	h.log.Info("provider thread", "session_id", e.id, "thread_id", id)
}

// spec builds the spawn spec of a session's child: the daemon's env, the
// profile's env, then the env pinned into the record at create.
func (h *Host) spec(rec store.Record, prov Provider, fence uint64) proc.Spec {
	env := os.Environ()
	for k, v := range prov.Env {
		env = append(env, k+"="+v)
	}
	for k, v := range rec.Env {
		env = append(env, k+"="+v)
	}
	return proc.Spec{
		Path: prov.Command[0], Args: prov.Command[1:], Env: env, Dir: rec.Cwd,
		Tags:        proc.Tags{SessionID: rec.ID, Fence: fence, StateID: h.st.StateID},
		StderrBytes: 16 << 10,
		Logger:      h.log, // the ladder logs every signal it sends
		Cgroups:     h.o.Cgroups,
	}
}

// watch learns the child's exit and runs the session's teardown. The
// adapter's reader ending (out: its Done) with the child still running is
// the provider gone too: it closed its stdout, so nothing it does reaches
// the session any more; it is evicted (the ladder stops the child).
func (h *Host) watch(e *entry, child *proc.Child, out <-chan struct{}) {
	defer h.wg.Done()
	select {
	case <-child.Exited():
	case <-out:
		h.outputEnded(e, child)
		<-child.Exited()
	}
	h.mu.Lock()
	if e.state == StateLive {
		e.state = StateExited // a starting or evicting entry sees the exit itself
	}
	if e.stopper != nil && e.pid == child.Identity().PID { // not a replacement's
		e.stopper.CancelWrites() // a descendant may still hold stdin open: no write waits on it
	}
	h.mu.Unlock()
	ex := child.Exit()
	var code any // the number, or null: never the pointer
	if ex.Code != nil {
		code = *ex.Code
	}
	h.log.Info("provider exited", "session_id", e.id, "pid", child.Identity().PID,
		"code", code, "signal", ex.Signal)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.child != child || e.state != StateExited {
		return // torn down, or failed to start, under someone else's hand
	}
	if _, err := h.evictLocked(context.Background(), e, evictExited); err != nil {
		h.scheduleRetryLocked(e, evictExited)
	}
}
