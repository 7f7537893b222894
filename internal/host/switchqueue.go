package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/store"
)

// A switch asked for while a turn runs is queued in the session's record
// (store.Record.PendingSwitch: a later one replaces it, one to the
// current account cancels it) and applied right after the turn's
// turn.completed: by the goroutine the adapter's turn.completed starts
// (afterTurn), or by whatever takes the session lock first — a send
// applies it before its own turn, a hold of a stored session before its
// start. A turn.completed {failed, rate_limited} starts the failover
// (failover.go) the same way.

// queueSwitchLocked records ps as e's queued switch (nil, or one to the
// current account cur: cancels the queued one) and journals
// account.switch_queued. Needs the session lock.
func (h *Host) queueSwitchLocked(ctx context.Context, e *entry, cur string, ps *store.PendingSwitch) (api.SwitchAccountResult, error) {
	if ps != nil && ps.To == cur {
		ps = nil
	}
	if ps == nil && e.rec.PendingSwitch == nil {
		return api.SwitchAccountResult{Account: cur}, nil
	}
	if err := h.st.UpdateRecord(e.id, func(r *store.Record) { r.PendingSwitch = ps }); err != nil {
		return api.SwitchAccountResult{}, fmt.Errorf("session %s: %w", e.id, err)
	}
	e.rec.PendingSwitch = ps
	e.pending.Store(ps != nil)
	if ps == nil {
		h.log.Info("queued account switch cancelled", "session_id", e.id, "account", cur)
		return api.SwitchAccountResult{Account: cur}, nil
	}
	if _, err := e.sink.Commit(ctx, event.New(event.AccountSwitchQueued, "", event.AccountSwitchData{
		From: cur, To: ps.To, Cause: ps.Cause, Reason: ps.Reason})); err != nil {
		return api.SwitchAccountResult{}, fmt.Errorf("session %s: journal account.switch_queued: %w", e.id, err)
	}
	h.log.Info("account switch queued behind the running turn", "session_id", e.id, "from", cur, "to", ps.To)
	return api.SwitchAccountResult{Queued: true, Account: ps.To}, nil
}

// queueBusyLocked queues ps behind the recycle of rt, the joining
// account's runtime that keeps a stale copy of e's thread
// (account.switch_queued {reason: thread_busy}, once), and starts that
// recycle. Needs the session lock.
func (h *Host) queueBusyLocked(ctx context.Context, e *entry, cur string, rt *sharedRuntime, ps *store.PendingSwitch) (api.SwitchAccountResult, error) {
	res := api.SwitchAccountResult{Queued: true, Account: ps.To}
	if q := e.rec.PendingSwitch; q == nil || *q != (store.PendingSwitch{To: ps.To, Cause: ps.Cause, RetryTurn: ps.RetryTurn, Reason: event.ReasonThreadBusy}) {
		next := *ps
		next.Reason = event.ReasonThreadBusy
		var err error
		if res, err = h.queueSwitchLocked(ctx, e, cur, &next); err != nil {
			return res, err
		}
	}
	h.recycleBusy(rt, e.id)
	return res, nil
}

// applyStoredPendingLocked applies a stored session's queued switch
// before its start and returns its record as now stored. A failure
// keeps the old account (the queued switch is dropped, journaled).
func (h *Host) applyStoredPendingLocked(ctx context.Context, rec store.Record, prov Provider) (store.Record, error) {
	ps := rec.PendingSwitch
	clear := func() (store.Record, error) {
		if err := h.st.UpdateRecord(rec.ID, func(r *store.Record) { r.PendingSwitch = nil }); err != nil {
			return rec, fmt.Errorf("session %s: %w", rec.ID, err)
		}
		rec.PendingSwitch = nil
		return rec, nil
	}
	if !prov.hasAccount(ps.To) || ps.To == accountOf(rec, prov) {
		return clear()
	}
	next, err := h.pinStored(ctx, rec, prov, ps.To, ps.Cause)
	if err != nil {
		return clear()
	}
	return next, nil
}

// emitter is the Emit of e's adapter: rows go to its sink, and a
// turn.completed that may be followed by a switch (one queued, or a rate
// limit) starts afterTurn.
func (h *Host) emitter(e *entry, sink *journal.Sink) func(event.Draft) {
	key := runtimeKey{profile: e.rec.Provider, account: accountOf(e.rec, h.o.Providers[e.rec.Provider])}
	return func(d event.Draft) {
		sink.Append(d)
		if d.Type != event.TurnCompleted {
			return
		}
		var td event.TurnCompletedData
		_ = json.Unmarshal(d.Data, &td)
		limited := td.Status == event.StatusFailed && td.Reason == event.ReasonRateLimited
		if limited {
			// Marked here, not by afterTurn: whatever takes the session
			// lock first (a send starting another turn), the limit holds.
			h.markLimited(e.id, key, td.ResetsAt)
		}
		if !limited && !e.pending.Load() {
			return
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.afterTurn(e.id, d.TurnID, limited)
		}()
	}
}

// afterTurn runs once a turn ended: the failover of a rate-limited one,
// else the queued switch. A session no longer live keeps its queued
// switch for its next start.
func (h *Host) afterTurn(id, turnID string, limited bool) {
	if h.afterTurnBegins != nil {
		h.afterTurnBegins()
	}
	ctx, cancel := context.WithTimeout(h.starts, h.o.StartTimeout+h.evictBound())
	defer cancel()
	e, err := h.lockEntry(ctx, id, false)
	if err != nil || e == nil {
		return
	}
	cur := e
	defer func() {
		e.mu.Unlock()
		if cur != e && cur != nil {
			cur.mu.Unlock()
		}
	}()
	h.mu.Lock()
	live := e.state == StateLive && e.adapter != nil
	h.mu.Unlock()
	if !live {
		return
	}
	if err := e.sink.Drain(ctx); err != nil {
		h.log.Warn("after a turn: drain", "session_id", id, "err", err)
		return
	}
	prov := h.o.Providers[e.rec.Provider]
	if h.j.State(id).OpenTurn != "" {
		// Another turn began first: the switch waits for its end; a
		// failover is queued (the failed prompt is not sent again: a
		// newer one was).
		if limited {
			h.queueFailoverLocked(ctx, e, prov, turnID)
		}
		return
	}
	if limited {
		cur = h.failoverLocked(ctx, e, prov, turnID)
		return
	}
	cur = h.applyPendingLocked(ctx, e, prov, true)
}

// applyPendingLocked applies e's queued switch, if any, now that no turn
// runs, and returns the session's entry (locked; the caller unlocks e in
// any case). A queued failover's failed prompt (RetryTurn) is sent again
// once switched when retry is set (not when a send applies it: a newer
// prompt goes instead). Needs the session lock.
func (h *Host) applyPendingLocked(ctx context.Context, e *entry, prov Provider, retry bool) *entry {
	ps := e.rec.PendingSwitch
	if ps == nil {
		return e
	}
	cur := accountOf(e.rec, prov)
	if ps.To == cur || !prov.hasAccount(ps.To) {
		if _, err := h.queueSwitchLocked(ctx, e, cur, nil); err != nil {
			h.log.Error("drop a queued switch", "session_id", e.id, "err", err)
		}
		return e
	}
	var note event.AccountSwitchData
	if ps.RetryTurn != "" {
		note = event.AccountSwitchData{TurnID: ps.RetryTurn, Retried: retry}
		if !retry {
			note.NoRetry = "a newer prompt was sent before the queued failover ran: the failed one is not sent again"
			dropped := *ps
			dropped.RetryTurn = "" // should it wait again, it never goes after the newer prompt
			ps = &dropped
		}
	}
	out, err := h.switchLiveLocked(ctx, e, prov, ps.To, ps.Cause, note)
	if out.busy != nil { // it keeps waiting, now for that runtime's recycle
		if _, qerr := h.queueBusyLocked(ctx, e, cur, out.busy, ps); qerr != nil {
			h.log.Error("queue a switch behind a runtime's recycle", "session_id", e.id, "err", qerr)
		}
		return e
	}
	if err != nil {
		h.log.Warn("queued account switch failed", "session_id", e.id, "to", ps.To, "err", err)
		if out.e == e {
			if _, cerr := h.queueSwitchLocked(ctx, e, cur, nil); cerr != nil {
				h.log.Error("drop a queued switch", "session_id", e.id, "err", cerr)
			}
		}
		return out.e
	}
	if note.Retried && out.e != nil {
		text, _, _, _ := h.turnFacts(e.id, ps.RetryTurn)
		if _, serr := h.sendLocked(ctx, out.e, api.SendParams{SessionID: e.id, Text: text}, ps.RetryTurn); serr != nil {
			h.log.Warn("queued failover: sending the rate-limited turn's prompt again failed", "session_id", e.id, "turn_id", ps.RetryTurn, "err", serr)
		}
	}
	return out.e
}
