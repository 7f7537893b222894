package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/budget"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/eviction"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/store"
)

// Step names of a provider session's teardown, in order.
const (
	StepStopChild    = "stop-provider-child"
	StepDrain        = "drain-published"
	StepCloseSink    = "close-sink"
	StepDiscardSink  = "discard-sink"
	StepReleaseLease = "release-lease"
	StepForget       = "forget-session"
)

// evictCause says why a session is torn down; it picks the reasons journaled.
type evictCause int

const (
	evictClosed evictCause = iota
	evictIdle
	evictExited
	evictShutdown
	evictStartFailed
	evictUnresponsive // the provider ignored an interrupt
	evictSwitch       // an account switch: the session starts again at once on its new account
	evictRecycle      // its runtime is recycled: the session starts again at once on a new one
)

// reason is the session.ended / turn.completed reason of a cause.
func (c evictCause) reason() string {
	switch c {
	case evictClosed:
		return event.ReasonClosed
	case evictIdle, evictUnresponsive:
		return event.ReasonEvicted
	case evictShutdown:
		return event.ReasonShutdown
	case evictSwitch:
		return event.ReasonAccountSwitch
	case evictRecycle:
		return event.ReasonRuntimeRecycle
	default:
		return event.ReasonProviderExited
	}
}

// expected reports whether the daemon asked the child to stop.
func (c evictCause) expected() bool { return c != evictExited && c != evictStartFailed }

// ErrExitUnproven is the stop step's error when the root's exit is not proven.
var ErrExitUnproven = errors.New("provider root not proven exited")

// plan is the provider session's teardown: the six eviction steps of
// docs/protocol.md ("Eviction steps"), in order.
// The order is the correctness property: the child is stopped before its
// rows are drained, the sink is closed only after, the lease is released at
// the fence captured now, and the entry is forgotten last.
func (h *Host) plan(e *entry, cause evictCause) []eviction.Step {
	if e.rt != nil {
		if e.rt.exited() {
			return h.exitedSharedPlan(e, cause)
		}
		return h.sharedPlan(e, cause)
	}
	fence := e.fence
	return []eviction.Step{
		{Name: StepStopChild, Timeout: h.stopTimeout(), Run: func(ctx context.Context) error { return h.stepStop(ctx, e) }},
		{Name: StepDrain, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepDrain(ctx, e, cause) }},
		{Name: StepCloseSink, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepCloseSink(ctx, e, cause) }},
		{Name: StepDiscardSink, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepDiscard(e) }},
		{Name: StepReleaseLease, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { return h.stepRelease(ctx, e, fence) }},
		{Name: StepForget, Timeout: h.o.StepTimeout, Run: func(ctx context.Context) error { h.forgetLocked(e); return nil }},
	}
}

// stopTimeout is the stop step's deadline: the whole ladder and a margin
// (budget.Stop).
func (h *Host) stopTimeout() time.Duration { return budget.Stop(budget.Ladder(h.o.Ladder)) }

// evictBound bounds one eviction attempt: the wait for a step left behind
// by the previous attempt, the stop step and the five others (budget.Evict).
func (h *Host) evictBound() time.Duration {
	return budget.Evict(budget.Ladder(h.o.Ladder), h.o.StepTimeout)
}

// evictLocked runs the teardown of e now, bounded by ctx and evictBound
// (callers that must not be cancelled pass a context without a deadline).
// On failure e stays indexed with its child loaded and the error names the
// step. A step the previous attempt left running is waited for at most a
// step timeout. Needs the session lock.
func (h *Host) evictLocked(ctx context.Context, e *entry, cause evictCause) ([]api.StepResult, error) {
	ctx, cancel := context.WithTimeout(ctx, h.evictBound())
	defer cancel()
	h.mu.Lock()
	prev := e.state
	e.state = StateEvicting
	if e.idle != nil {
		e.idle.Stop()
		e.idle = nil
	}
	e.releaseAt = nil
	h.mu.Unlock()

	start := time.Now()
	if e.leftBehind != nil {
		t := time.NewTimer(h.o.StepTimeout)
		select {
		case <-e.leftBehind:
			e.leftBehind = nil
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	var results []eviction.Result
	var err error
	if e.leftBehind != nil {
		err = &eviction.Error{Step: "wait-previous-attempt", Err: errors.New("a step of the previous attempt is still running")}
	} else {
		results, err = eviction.Run(ctx, h.plan(e, cause))
	}
	steps := make([]api.StepResult, len(results))
	for i, r := range results {
		steps[i] = api.StepResult{Name: r.Name, OK: r.OK, Ms: r.Duration.Milliseconds()}
	}
	if err == nil {
		h.count(func(c *counters) { c.evicted(cause, "ok") })
		h.log.Info("session evicted", "session_id", e.id, "fence", e.fence, "reason", cause.reason(),
			"ms", time.Since(start).Milliseconds())
		return steps, nil
	}
	var se *eviction.Error
	errors.As(err, &se)
	if se.Abandoned != nil {
		e.leftBehind = se.Abandoned
	}
	h.mu.Lock()
	if !e.gone {
		e.state = loadedStateLocked(e, prev)
		if prev == StateStarting {
			// A failed start whose teardown failed: loaded but unusable,
			// so the next hold tears it down before starting afresh.
			e.state = StateExited
		}
	}
	h.mu.Unlock()
	kind, outcome := api.KindEvictionFailed, "failed"
	if errors.Is(err, ErrExitUnproven) {
		kind, outcome = api.KindExitUnproven, "unproven"
	}
	h.count(func(c *counters) { c.evicted(cause, outcome) })
	h.log.Error("eviction failed", "session_id", e.id, "fence", e.fence, "step", se.Step,
		"completed", se.Completed, "err", se.Err)
	return steps, &api.Error{Kind: kind, Msg: fmt.Sprintf("session %s: eviction step %s", e.id, se.Step), Err: se.Err,
		Data: map[string]any{"step": se.Step, "completed": nonNil(se.Completed), "cause": se.Err.Error(), "steps": steps}}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// stepStop runs the close ladder; an unproven root aborts the teardown, a
// tree not proven gone goes to bounded cleanup.
func (h *Host) stepStop(ctx context.Context, e *entry) error {
	if e.child == nil {
		return nil // never spawned
	}
	if e.verdict != nil && e.verdict.Root == proc.Exited {
		return nil // an earlier attempt proved it
	}
	v := h.stopChild(ctx, e.child, h.o.Ladder)
	e.verdict = &v
	if v.Root != proc.Exited {
		return fmt.Errorf("%w: pid %d is %s", ErrExitUnproven, e.child.Identity().PID, v.Root)
	}
	if v.Tree != proc.Exited {
		h.log.Warn("provider tree not proven gone; bounded cleanup takes it", "session_id", e.id,
			"survivors", len(v.Survivors))
		h.cleanup.AddVerdict(proc.Tags{SessionID: e.id, Fence: e.fence, StateID: h.st.StateID}, v)
	}
	return nil
}

// stepDrain keeps what the provider wrote while exiting, then closes the
// open turn and journals provider.exited.
func (h *Host) stepDrain(ctx context.Context, e *entry, cause evictCause) error {
	if e.sink == nil || e.tailDone[sinkClosed] {
		return nil
	}
	if e.adapter != nil {
		if err := e.adapter.Drain(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("drain provider output: %w", err)
		}
	}
	if err := e.sink.Drain(ctx); err != nil {
		if !errors.Is(err, journal.ErrLost) {
			return fmt.Errorf("drain sink: %w", err)
		}
		// Rows that could not be stored are not coming back: retrying the
		// drain cannot help. The tail below fails too if the store still
		// refuses writes; if it commits, it carries the loss note first.
		h.log.Error("journal lost rows of this session", "session_id", e.id, "err", err)
	}
	var tail []event.Draft
	st := h.j.State(e.id)
	if !e.tailDone[event.TurnCompleted] {
		// Nobody can answer an approval of a child that is gone: each is
		// closed before the turn ends.
		tail = append(tail, cancelApprovals(st, cause.reason())...)
	}
	if st.OpenTurn != "" && !e.tailDone[event.TurnCompleted] {
		tail = append(tail, event.New(event.TurnCompleted, st.OpenTurn, event.TurnCompletedData{
			Status: event.StatusInterrupted, Reason: cause.reason()}))
	}
	if e.child != nil && !e.tailDone[event.ProviderExited] {
		tail = append(tail, event.New(event.ProviderExited, "", h.exitData(e, cause)))
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

// exitData is provider.exited's payload, also kept as the record's lastExit.
func (h *Host) exitData(e *entry, cause evictCause) event.ProviderExitedData {
	d := event.ProviderExitedData{Root: "exited", Tree: "exited", Expected: cause.expected()}
	if !d.Expected {
		h.mu.Lock()
		d.Limit = e.limitHit // it died having hit its cgroup's limit
		h.mu.Unlock()
	}
	if v := e.verdict; v != nil {
		d.Root, d.Tree, d.Code = v.Root.String(), v.Tree.String(), v.Code
		if v.Signal != "" {
			sig := v.Signal
			d.Signal = &sig
		}
	}
	ex, _ := json.Marshal(api.ExitInfo{Root: d.Root, Tree: d.Tree, Code: d.Code, Signal: d.Signal, At: h.clock.Now().UTC()})
	if err := h.st.UpdateRecord(e.id, func(r *store.Record) { r.LastExit = ex }); err != nil {
		h.log.Warn("record last exit", "session_id", e.id, "err", err)
	}
	return d
}

// stepCloseSink journals session.ended and closes the sink.
func (h *Host) stepCloseSink(ctx context.Context, e *entry, cause evictCause) error {
	if e.sink == nil || e.tailDone[sinkClosed] {
		return nil
	}
	if !e.tailDone[event.SessionEnded] {
		if _, err := e.sink.Commit(ctx, event.New(event.SessionEnded, "", event.SessionEndedData{Reason: cause.reason()})); err != nil {
			return fmt.Errorf("journal session.ended: %w", err)
		}
		e.tailDone[event.SessionEnded] = true
	}
	if err := e.sink.Close(ctx); err != nil {
		return fmt.Errorf("close sink: %w", err)
	}
	e.tailDone[sinkClosed] = true
	return nil
}

// sinkClosed marks, in entry.tailDone, a sink closed by an earlier attempt.
const sinkClosed = "sink-closed"

// stepDiscard drops the cached sink so a re-hold gets a fresh one.
func (h *Host) stepDiscard(e *entry) error {
	if e.sink != nil {
		e.sink.Discard()
		e.sink = nil
	}
	return nil
}

// stepRelease releases the lease at the fence captured when the eviction
// began, then journals lease.released.
func (h *Host) stepRelease(ctx context.Context, e *entry, fence uint64) error {
	if e.tailDone[event.LeaseReleased] {
		return nil
	}
	ev := &lease.Evidence{Kind: lease.EvidenceExitObserved, At: h.clock.Now().UTC()}
	if _, err := h.leases.Release(e.id, fence, ev); err != nil {
		if !errors.Is(err, lease.ErrStaleFence) {
			return fmt.Errorf("release lease at fence %d: %w", fence, err)
		}
		h.log.Warn("lease already moved past our fence; nothing to release", "session_id", e.id, "fence", fence)
	}
	if _, err := h.j.Append(ctx, e.id, event.New(event.LeaseReleased, "", map[string]any{"fence": fence})); err != nil {
		return fmt.Errorf("journal lease.released: %w", err)
	}
	e.tailDone[event.LeaseReleased] = true
	return nil
}
