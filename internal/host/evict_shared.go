package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/eviction"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider"
)

// Step names of a session's teardown on a shared runtime, in order (the
// last four are the per-session list's).
const (
	StepDrainSession  = "drain-session"
	StepInterruptTurn = "interrupt-turn"
	StepKillCommands  = "kill-thread-commands"
	StepDetachThread  = "detach-thread"
)

// sharedPlan is the teardown of a session on a shared runtime that goes
// on: its published rows drained, its open turn interrupted (its
// approvals cancelled) and closed in the journal, its thread detached
// (provider.detached), then session.ended, the sink closed and dropped,
// the lease released, the entry forgotten and taken off the runtime. The
// runtime's process is not touched: it has its own teardown
// (runtimePlan). The order is the property: nothing of the thread is
// journaled after its turn closed, the thread is detached before the
// session ends, and the lease goes only once the journal has the tail.
func (h *Host) sharedPlan(e *entry, cause evictCause) []eviction.Step {
	fence := e.fence
	return []eviction.Step{
		{Name: StepDrainSession, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepDrainSession(ctx, e) }},
		{Name: StepInterruptTurn, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepInterruptTurn(ctx, e, cause) }},
		{Name: StepKillCommands, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { h.stepKillCommands(ctx, e); return nil }},
		{Name: StepDetachThread, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepDetachThread(ctx, e) }},
		{Name: StepCloseSink, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepCloseSink(ctx, e, cause) }},
		{Name: StepDiscardSink, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepDiscard(e) }},
		{Name: StepReleaseLease, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepRelease(ctx, e, fence) }},
		{Name: StepForget, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { h.forgetShared(e); return nil }},
	}
}

// stepKillCommands stops what is left of the session's own commands
// once its turn was interrupted: the processes of the runtime's tree
// the provider marked with the session's thread (codex:
// CODEX_THREAD_ID), and their descendants, through the close ladder's
// signals; the runtime and its other threads' commands are not
// touched. A provider that marks nothing, or a thread that never
// started, has nothing to kill. Failures are logged: the runtime's own
// eviction stops its whole tree later.
func (h *Host) stepKillCommands(ctx context.Context, e *entry) {
	m, ok := e.adapter.(provider.CommandMarker)
	th, _ := e.adapter.(provider.Thread)
	if !ok || th == nil || th.ThreadID() == "" {
		return
	}
	left, err := proc.Marked(e.rt.tags(h.st.StateID), m.CommandEnv(), th.ThreadID())
	if err != nil {
		h.log.Warn("find the leftover commands of a detaching session", "session_id", e.id, "runtime_id", e.rt.id, "err", err)
		return
	}
	if len(left) == 0 {
		return
	}
	l := h.o.Ladder
	l.Grace = 0 // no stdin of ours to close
	v := proc.StopMarked(ctx, h.log, left, l)
	h.log.Info("leftover commands of a detaching session stopped", "session_id", e.id, "runtime_id", e.rt.id,
		"thread_id", th.ThreadID(), "processes", len(left), "tree", v.Tree.String())
}

// exitedSharedPlan is the teardown of a session whose shared runtime
// exited under it: the per-session list without its stop step (the
// runtime's teardown stopped the process): the drain keeps what the
// process wrote, then turn.completed {interrupted}, provider.exited (with
// the runtime's id), session.ended, lease.released.
func (h *Host) exitedSharedPlan(e *entry, cause evictCause) []eviction.Step {
	fence := e.fence
	return []eviction.Step{
		{Name: StepDrain, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepDrainExitedShared(ctx, e, cause) }},
		{Name: StepCloseSink, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepCloseSink(ctx, e, cause) }},
		{Name: StepDiscardSink, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepDiscard(e) }},
		{Name: StepReleaseLease, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepRelease(ctx, e, fence) }},
		{Name: StepForget, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { h.forgetShared(e); return nil }},
	}
}

// stepDrainSession flushes what the session's thread already published.
func (h *Host) stepDrainSession(ctx context.Context, e *entry) error {
	if e.sink == nil || e.tailDone[sinkClosed] {
		return nil
	}
	return h.drainSink(ctx, e)
}

// drainSink flushes e's sink; rows the store lost are not coming back
// (logged; the tail carries the loss note).
func (h *Host) drainSink(ctx context.Context, e *entry) error {
	if err := e.sink.Drain(ctx); err != nil {
		if !errors.Is(err, journal.ErrLost) {
			return fmt.Errorf("drain sink: %w", err)
		}
		h.log.Error("journal lost rows of this session", "session_id", e.id, "err", err)
	}
	return nil
}

// stepInterruptTurn silences the thread, asks the provider to end its
// open turn (which cancels the turn's approvals there), and journals the
// turn's end: its approvals and items closed, turn.completed
// {interrupted}. Only this session's turn: the runtime's other threads
// go on.
func (h *Host) stepInterruptTurn(ctx context.Context, e *entry, cause evictCause) error {
	if e.sink == nil || e.tailDone[event.TurnCompleted] || e.tailDone[sinkClosed] {
		return nil
	}
	if th, ok := e.adapter.(provider.Thread); ok {
		th.Silence() // from here on the journal's tail is ours
		if th.Busy() {
			pctx, cancel := providerShare(ctx)
			_, err := th.Interrupt(pctx)
			cancel()
			if err != nil {
				h.log.Warn("interrupt the turn of a detaching session", "session_id", e.id, "err", err)
			}
		}
	}
	if err := h.drainSink(ctx, e); err != nil {
		return err
	}
	st := h.j.State(e.id)
	tail := cancelApprovals(st, cause.reason())
	if st.OpenTurn != "" {
		tail = append(tail, h.interruptItems(e.id, st)...)
		tail = append(tail, event.New(event.TurnCompleted, st.OpenTurn, event.TurnCompletedData{
			Status: event.StatusInterrupted, Reason: cause.reason()}))
	}
	if len(tail) > 0 {
		if _, err := e.sink.Commit(ctx, tail...); err != nil {
			return fmt.Errorf("journal tail: %w", err)
		}
	}
	e.tailDone[event.TurnCompleted] = true
	return nil
}

// stepDetachThread stops the thread's events (codex thread/unsubscribe;
// the provider keeps it loaded, and locked, until its process exits) and
// journals provider.detached.
func (h *Host) stepDetachThread(ctx context.Context, e *entry) error {
	if e.sink == nil || e.tailDone[event.ProviderDetached] || e.tailDone[sinkClosed] {
		return nil
	}
	th, _ := e.adapter.(provider.Thread)
	if th == nil {
		return nil
	}
	thread := th.ThreadID()
	pctx, cancel := providerShare(ctx)
	err := th.Detach(pctx)
	cancel()
	if err != nil {
		// Our side no longer routes the thread to the session either way.
		h.log.Warn("detach thread", "session_id", e.id, "thread_id", thread, "err", err)
	}
	if thread == "" {
		return nil // the thread never started
	}
	if _, err := e.sink.Commit(ctx, event.New(event.ProviderDetached, "", event.ProviderDetachedData{
		RuntimeID: e.rt.id, ThreadID: thread})); err != nil {
		return fmt.Errorf("journal provider.detached: %w", err)
	}
	e.tailDone[event.ProviderDetached] = true
	return nil
}

// providerShare is the part of a step's bound a provider's answer may
// take: half of what is left. The rest is the step's own journal writes,
// which a provider that stopped answering (SIGSTOP, a wedged runtime)
// must not starve.
func providerShare(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(deadline)/2)
}

// stepDrainExitedShared keeps what the exited runtime wrote, then closes
// the session's open turn and journals provider.exited with the
// runtime's verdict and id.
func (h *Host) stepDrainExitedShared(ctx context.Context, e *entry, cause evictCause) error {
	if e.sink == nil || e.tailDone[sinkClosed] {
		return nil
	}
	rt := e.rt
	if rt.proto != nil {
		if err := rt.proto.Drain(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("drain runtime output: %w", err)
		}
	}
	if err := h.drainSink(ctx, e); err != nil {
		return err
	}
	var tail []event.Draft
	st := h.j.State(e.id)
	if !e.tailDone[event.TurnCompleted] {
		tail = append(tail, cancelApprovals(st, cause.reason())...)
		if st.OpenTurn != "" {
			tail = append(tail, event.New(event.TurnCompleted, st.OpenTurn, event.TurnCompletedData{
				Status: event.StatusInterrupted, Reason: cause.reason()}))
		}
	}
	if !e.tailDone[event.ProviderExited] {
		rt.mu.Lock()
		v := rt.verdict
		rt.mu.Unlock()
		e.verdict = v
		d := h.exitData(e, cause)
		d.RuntimeID = rt.id
		tail = append(tail, event.New(event.ProviderExited, "", d))
	}
	if len(tail) == 0 {
		return nil
	}
	if _, err := e.sink.Commit(ctx, tail...); err != nil {
		return fmt.Errorf("journal tail: %w", err)
	}
	for _, d := range tail {
		e.tailDone[d.Type] = true
	}
	return nil
}

// forgetShared forgets e and takes it off its runtime (whose release
// clock starts when e was its last session).
func (h *Host) forgetShared(e *entry) {
	h.forgetLocked(e)
	h.unbindLocked(e)
}
