package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/store"
)

// An account switch (agentSession.switchAccount, or failover) runs under
// the session lock. A stored session changes its pin (its thread's copy
// carried by the profile's Mover). A live idle one: the thread's copy is
// carried first (the session is idle and locked: the copy is settled, and
// a failure leaves everything as it was), then the session is taken off
// its runtime by its own teardown (the shared detach list, or the stop of
// its process), its record pinned to the new account, and it starts again
// at once (a successor entry takes its place in the map atomically, with
// its holds) on the new account's runtime, resuming the thread by id.
// A live session with a turn running queues the switch in its record; it
// is applied right after the turn's turn.completed (switchqueue.go).

// switchOutcome is what an applied switch did.
type switchOutcome struct {
	e          *entry // the session's entry now (locked): the successor of a live one
	continuity string
	// busy: nothing moved, the joining account's runtime keeps a stale
	// copy of the thread and serves other sessions (switch_recycle.go).
	busy *sharedRuntime
}

// SwitchAccount implements agentSession.switchAccount.
func (h *Host) SwitchAccount(ctx context.Context, p api.SwitchAccountParams) (api.SwitchAccountResult, error) {
	rec, err := h.record(p.SessionID)
	if err != nil {
		return api.SwitchAccountResult{}, err
	}
	prov, ok := h.o.Providers[rec.Provider]
	if !ok {
		return api.SwitchAccountResult{}, &api.Error{Kind: api.KindUnknownProvider,
			Msg:  fmt.Sprintf("session %s: provider %q is no longer configured", rec.ID, rec.Provider),
			Data: map[string]any{"provider": rec.Provider, "known": h.Providers()}}
	}
	if !prov.hasAccount(p.Account) {
		return api.SwitchAccountResult{}, unknownAccount(prov, p.Account)
	}
	e, err := h.lockEntry(ctx, p.SessionID, true)
	if err != nil {
		return api.SwitchAccountResult{}, err
	}
	locked := []*entry{e}
	defer func() {
		for _, l := range locked {
			l.mu.Unlock()
		}
	}()
	if e.state == StateExited {
		// Its process exited on its own: its teardown is owed first; a
		// successor (locked) keeps the session's place so no hold starts
		// it under the old pin meanwhile.
		succ := h.successorOf(e)
		locked = append(locked, succ)
		if _, err := h.evictLocked(context.WithoutCancel(ctx), e, evictExited); err != nil {
			h.mu.Lock()
			e.successor = nil
			h.mu.Unlock()
			h.scheduleRetryLocked(e, evictExited)
			return api.SwitchAccountResult{}, err
		}
		e = succ
	}
	h.mu.Lock()
	state, gone := e.state, e.gone
	h.mu.Unlock()
	if gone || state == StateStored {
		// Pinned while the entry (ours: a stored session has none) is
		// locked in the map, so no hold starts it under the old pin.
		r, err := h.switchStored(ctx, p.SessionID, prov, p.Account)
		if !gone {
			h.forgetLocked(e)
		}
		return r, err
	}
	if state != StateLive {
		return api.SwitchAccountResult{}, &api.Error{Kind: api.KindInvalidState,
			Msg: fmt.Sprintf("session %s is %s: retry once its teardown ended", e.id, state)}
	}
	if err := e.sink.Drain(ctx); err != nil {
		return api.SwitchAccountResult{}, fmt.Errorf("session %s: %w", e.id, err)
	}
	if err := h.storeWritable(ctx, e.id); err != nil {
		return api.SwitchAccountResult{}, err
	}
	cur := accountOf(e.rec, prov)
	if st := h.j.State(e.id); st.OpenTurn != "" {
		if p.When == api.SwitchWhenNow {
			return api.SwitchAccountResult{}, &api.Error{Kind: api.KindTurnRunning,
				Msg:  "session " + e.id + ": turn " + st.OpenTurn + " is running (switch with when \"idle\" to queue it)",
				Data: map[string]any{"turnId": st.OpenTurn}}
		}
		return h.queueSwitchLocked(ctx, e, cur, &store.PendingSwitch{To: p.Account, Cause: event.SwitchCauseUser})
	}
	if p.Account == cur {
		return h.queueSwitchLocked(ctx, e, cur, nil) // cancels a queued one, if any
	}
	out, err := h.switchLiveLocked(ctx, e, prov, p.Account, event.SwitchCauseUser, event.AccountSwitchData{})
	if out.busy != nil {
		if p.When == api.SwitchWhenNow {
			if _, cerr := e.sink.Commit(ctx, event.New(event.AccountSwitchFailed, "", event.AccountSwitchData{
				From: cur, To: p.Account, Cause: err.Error()})); cerr != nil {
				h.log.Error("journal account.switch_failed", "session_id", e.id, "err", cerr)
			}
			return api.SwitchAccountResult{}, err
		}
		return h.queueBusyLocked(ctx, e, cur, out.busy, &store.PendingSwitch{To: p.Account, Cause: event.SwitchCauseUser})
	}
	if out.e != nil && out.e != e {
		locked = append(locked, out.e)
	}
	if err != nil {
		return api.SwitchAccountResult{}, err
	}
	return api.SwitchAccountResult{Switched: true, Account: p.Account}, nil
}

// switchStored changes a stored session's pin: the thread's copy is
// carried now (no process runs), else the next turn carries the portable
// history. Its journal gets account.switched. The caller holds the
// session lock (the entry it just forgot), so no hold starts it meanwhile.
func (h *Host) switchStored(ctx context.Context, id string, prov Provider, to string) (api.SwitchAccountResult, error) {
	rec, err := h.record(id)
	if err != nil {
		return api.SwitchAccountResult{}, err
	}
	from := accountOf(rec, prov)
	if to == from {
		if rec.PendingSwitch != nil {
			if err := h.st.UpdateRecord(id, func(r *store.Record) { r.PendingSwitch = nil }); err != nil {
				return api.SwitchAccountResult{}, fmt.Errorf("session %s: %w", id, err)
			}
		}
		return api.SwitchAccountResult{Account: from}, nil
	}
	if _, err := h.pinStored(ctx, rec, prov, to, event.SwitchCauseUser); err != nil {
		return api.SwitchAccountResult{}, err
	}
	return api.SwitchAccountResult{Switched: true, Account: to}, nil
}

// pinStored moves a stored session's record to account `to`, carrying
// its thread, and journals account.switched (or account.switch_failed:
// the record is then unchanged). It returns the record as now stored.
func (h *Host) pinStored(ctx context.Context, rec store.Record, prov Provider, to, cause string) (store.Record, error) {
	from := accountOf(rec, prov)
	continuity, err := h.carryThread(ctx, rec, prov, to)
	if err != nil {
		h.journalStored(ctx, rec.ID, event.New(event.AccountSwitchFailed, "", event.AccountSwitchData{From: from, To: to, Cause: err.Error()}))
		return rec, h.switchError(rec.ID, to, err)
	}
	h.markStale(rec.ThreadID)
	next := pinned(rec, prov, to, continuity)
	if err := h.st.UpdateRecord(rec.ID, func(r *store.Record) { *r = next }); err != nil {
		return rec, fmt.Errorf("session %s: %w", rec.ID, err)
	}
	h.journalStored(ctx, rec.ID, event.New(event.AccountSwitched, "", event.AccountSwitchData{
		From: from, To: to, Cause: cause, Continuity: continuity}))
	h.log.Info("account switched", "session_id", rec.ID, "from", from, "to", to, "cause", cause, "continuity", continuity, "live", false)
	return next, nil
}

// pinned is rec moved to account `to` with the given continuity: a
// portable one forgets the thread and carries the history instead.
func pinned(rec store.Record, prov Provider, to, continuity string) store.Record {
	rec.Account, rec.Env, rec.PendingSwitch = to, prov.accountEnv(to), nil
	if continuity == event.ContinuityPortable {
		rec.ThreadID, rec.ThreadFresh, rec.Portable = "", false, true
	}
	return rec
}

// carryThread copies rec's thread from its account's env into to's with
// the profile's Mover: native when it did, portable when the leaving
// account holds no copy or the profile keeps none to carry, none when the
// session has no begun thread. Any other failure is the switch's.
func (h *Host) carryThread(ctx context.Context, rec store.Record, prov Provider, to string) (string, error) {
	if rec.ThreadID == "" || rec.ThreadFresh {
		return event.ContinuityNone, nil
	}
	if prov.Mover == nil {
		return event.ContinuityPortable, nil
	}
	err := prov.Mover(ctx, provider.Move{From: envLookup(rec.Env), To: envLookup(prov.accountEnv(to)),
		ThreadID: rec.ThreadID, Cwd: rec.Cwd})
	switch {
	case err == nil:
		return event.ContinuityNative, nil
	case errors.Is(err, provider.ErrNoThreadCopy):
		h.log.Info("account switch: no copy of the thread to carry; portable", "session_id", rec.ID, "thread_id", rec.ThreadID, "err", err)
		return event.ContinuityPortable, nil
	}
	return "", fmt.Errorf("carry thread %s to account %s: %w", rec.ThreadID, to, err)
}

// switchError is the answer of a failed switch: the session keeps its
// account.
func (h *Host) switchError(id, to string, err error) error {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Kind != api.KindProviderFailed {
		return ae
	}
	msg := fmt.Sprintf("session %s: switch to account %s failed, the session keeps its account", id, to) // Error() adds err once
	return &api.Error{Kind: api.KindProviderFailed, Msg: msg, Err: err, Data: map[string]any{"cause": err.Error(), "account": to}}
}

// journalStored appends d to the journal of a session without a sink.
func (h *Host) journalStored(ctx context.Context, id string, d event.Draft) {
	if _, err := h.j.Append(context.WithoutCancel(ctx), id, d); err != nil {
		h.log.Error("journal "+d.Type, "session_id", id, "err", err)
	}
}

// markStale notes that the runtime with thread loaded (if any) keeps a
// copy the session leaves behind: the thread never resumes there again
// while it runs.
func (h *Host) markStale(thread string) {
	if thread == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	owner := h.loaded[thread]
	if owner == nil {
		return
	}
	delete(h.loaded, thread)
	if h.stale[thread] == nil {
		h.stale[thread] = map[*sharedRuntime]bool{}
	}
	h.stale[thread][owner] = true
}

// staleIn is the live runtime of key that keeps a stale copy of thread
// (nil: none).
func (h *Host) staleIn(thread string, key runtimeKey) *sharedRuntime {
	h.mu.Lock()
	defer h.mu.Unlock()
	for rt := range h.stale[thread] {
		if rt.key == key {
			return rt
		}
	}
	return nil
}
