package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
)

// savedHold is a hold carried from a switching session's entry to its
// successor.
type savedHold struct {
	holder, conn, token string
	ttlAt               time.Time
}

// switchLiveLocked switches the live, idle session e to account `to`
// (switch.go has the order). note adds a failover's facts to
// account.switched. It returns the session's entry now, locked (e itself
// when nothing moved; the caller unlocks e in any case): on success the
// successor running on `to`; on a failure after e's teardown, the entry
// started again on the old account. Needs e's session lock.
func (h *Host) switchLiveLocked(ctx context.Context, e *entry, prov Provider, to, cause string, note event.AccountSwitchData) (switchOutcome, error) {
	ctx = context.WithoutCancel(ctx) // once begun, a switch ends whole
	old, err := h.record(e.id)
	if err != nil {
		return switchOutcome{e: e}, err
	}
	from := accountOf(old, prov)
	failed := func(err error) error {
		if _, cerr := e.sink.Commit(ctx, event.New(event.AccountSwitchFailed, "", event.AccountSwitchData{
			From: from, To: to, Cause: err.Error()})); cerr != nil {
			h.log.Error("journal account.switch_failed", "session_id", e.id, "err", cerr)
		}
		h.log.Warn("account switch failed; the session keeps its account", "session_id", e.id, "from", from, "to", to, "err", err)
		return h.switchError(e.id, to, err)
	}
	if prov.shared() && old.ThreadID != "" {
		if rt := h.staleIn(old.ThreadID, runtimeKey{profile: old.Provider, account: to}); rt != nil {
			if err := h.recycleStale(ctx, rt, old.ThreadID); err != nil {
				if errors.Is(err, errStaleBusy) {
					return switchOutcome{e: e, busy: rt}, err // the caller queues it or fails it
				}
				return switchOutcome{e: e}, failed(err)
			}
		}
	}
	continuity, err := h.carryThread(ctx, old, prov, to)
	if err != nil {
		return switchOutcome{e: e}, failed(err)
	}
	next := pinned(old, prov, to, continuity)
	if err := h.st.UpdateRecord(e.id, func(r *store.Record) { *r = next }); err != nil {
		return switchOutcome{e: e}, failed(fmt.Errorf("record the new account: %w", err))
	}
	holds := h.snapshotHolds(e)
	succ := h.successorOf(e)
	if _, err := h.evictLocked(ctx, e, evictSwitch); err != nil {
		h.mu.Lock()
		e.successor = nil
		h.mu.Unlock()
		succ.mu.Unlock()
		if rerr := h.st.UpdateRecord(e.id, func(r *store.Record) { *r = old; r.PendingSwitch = nil }); rerr != nil {
			h.log.Error("restore the record of a failed switch", "session_id", e.id, "err", rerr)
		}
		h.scheduleRetryLocked(e, evictSwitch)
		return switchOutcome{e: e}, failed(fmt.Errorf("take the session off its account: %w", err))
	}
	h.markStale(old.ThreadID)
	h.restoreHolds(succ, holds)
	backup := h.successorOf(succ)
	err = h.startLocked(ctx, succ)
	h.mu.Lock()
	succ.successor = nil
	h.mu.Unlock()
	if err == nil {
		backup.mu.Unlock() // never in the map
		continuity = h.afterSwitchStart(ctx, succ, old, continuity)
		d := note
		d.From, d.To, d.Cause, d.Continuity = from, to, cause, continuity
		if _, cerr := succ.sink.Commit(ctx, event.New(event.AccountSwitched, "", d)); cerr != nil {
			h.log.Error("journal account.switched", "session_id", e.id, "err", cerr)
		}
		h.settleHoldsLocked(succ)
		h.log.Info("account switched", "session_id", e.id, "from", from, "to", to, "cause", cause, "continuity", continuity)
		return switchOutcome{e: succ, continuity: continuity}, nil
	}
	// The new account's start failed: the session goes back to the old one.
	succ.mu.Unlock()
	if rerr := h.st.UpdateRecord(e.id, func(r *store.Record) { *r = old; r.PendingSwitch = nil }); rerr != nil {
		h.log.Error("restore the record of a failed switch", "session_id", e.id, "err", rerr)
	}
	h.journalStored(ctx, e.id, event.New(event.AccountSwitchFailed, "", event.AccountSwitchData{From: from, To: to, Cause: err.Error()}))
	h.log.Warn("account switch failed at the new account's start; back to the old one", "session_id", e.id, "from", from, "to", to, "err", err)
	h.mu.Lock()
	installed := h.sessions[e.id] == backup
	h.mu.Unlock()
	if !installed {
		backup.mu.Unlock()
		return switchOutcome{e: nil}, h.switchError(e.id, to, err)
	}
	h.restoreHolds(backup, holds)
	if rerr := h.startLocked(ctx, backup); rerr != nil {
		return switchOutcome{e: backup}, h.switchError(e.id, to,
			fmt.Errorf("%w (and starting again on account %s failed: %w)", err, from, rerr))
	}
	h.settleHoldsLocked(backup)
	return switchOutcome{e: backup}, h.switchError(e.id, to, err)
}

// afterSwitchStart settles the continuity once the session runs on its
// new account: a native switch whose resume the provider answered with
// the typed not-found (it started a fresh thread) becomes portable; a
// portable one journals provider.thread_replaced {account_switch}.
// Needs the session lock.
func (h *Host) afterSwitchStart(ctx context.Context, e *entry, old store.Record, continuity string) string {
	if continuity == event.ContinuityNative && e.rec.ThreadID != old.ThreadID {
		continuity = event.ContinuityPortable // the adapter journaled provider.thread_replaced with the provider's words
		if err := h.st.UpdateRecord(e.id, func(r *store.Record) { r.Portable = true }); err != nil {
			h.log.Error("record portable history owed", "session_id", e.id, "err", err)
		}
		e.rec.Portable = true
		return continuity
	}
	if continuity == event.ContinuityPortable && old.ThreadID != "" {
		if _, err := e.sink.Commit(ctx, event.New(event.ProviderThreadReplace, "", event.ThreadReplacedData{
			OldThreadID: old.ThreadID, NewThreadID: e.rec.ThreadID, Cause: event.ReasonAccountSwitch})); err != nil {
			h.log.Error("journal provider.thread_replaced", "session_id", e.id, "err", err)
		}
	}
	return continuity
}

// successorOf is a fresh entry for e's session, locked, set to take e's
// place in the map when e is forgotten.
func (h *Host) successorOf(e *entry) *entry {
	s := newEntry(e.id, StateStored)
	s.mu.Lock()
	h.mu.Lock()
	e.successor = s
	h.mu.Unlock()
	return s
}

// snapshotHolds copies e's holds.
func (h *Host) snapshotHolds(e *entry) []savedHold {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]savedHold, 0, len(e.holds))
	for id, hd := range e.holds {
		out = append(out, savedHold{holder: id, conn: hd.conn, token: hd.token, ttlAt: hd.ttlAt})
	}
	return out
}

// restoreHolds gives s the holds e had (their tokens unchanged), but for
// those of connections closed since and ttls run out.
func (h *Host) restoreHolds(s *entry, holds []savedHold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	for _, sh := range holds {
		cs := h.conns[sh.conn]
		if cs == nil || cs.closed || (!sh.ttlAt.IsZero() && !now.Before(sh.ttlAt)) {
			continue
		}
		hd := &hold{conn: sh.conn, token: sh.token, ttlAt: sh.ttlAt}
		if !sh.ttlAt.IsZero() {
			holder, token := sh.holder, sh.token
			hd.ttl = h.clock.AfterFunc(sh.ttlAt.Sub(now), func() { h.dropHold(s, holder, token, "ttl") })
		}
		cs.holds++
		s.holds[sh.holder] = hd
	}
}

// settleHoldsLocked arms the release clock of a session that started
// again without holds. Needs the session lock.
func (h *Host) settleHoldsLocked(e *entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(e.holds) == 0 && !e.gone && e.state == StateLive {
		h.armMapLocked(e, h.o.IdleTimeout)
	}
}

// errStaleBusy: the target runtime keeps a stale copy and serves others.
var errStaleBusy = errors.New("the target account's runtime still has a stale copy of the thread loaded and serves other sessions")

// recycleStale stops rt, the target account's runtime that keeps a
// stale copy of thread, when no session is on it (it is recycled: the
// next session of its account starts a new one), and waits until it is
// gone; one still serving sessions is thread_busy.
func (h *Host) recycleStale(ctx context.Context, rt *sharedRuntime, thread string) error {
	rt.mu.Lock()
	n := len(rt.sessions)
	rt.mu.Unlock()
	if n > 0 {
		return &api.Error{Kind: api.KindThreadBusy, Msg: fmt.Sprintf("thread %s, runtime %s (switch with when \"idle\" to queue it)", thread, rt.id), // Error() adds why
			Err: errStaleBusy, Data: map[string]any{"runtimeId": rt.id, "threadId": thread}}
	}
	h.log.Info("recycling a runtime that keeps a stale copy of a switching thread", "runtime_id", rt.id, "thread_id", thread)
	ctx, cancel := context.WithTimeout(ctx, h.evictBound())
	defer cancel()
	h.evictRuntime(rt, "recycle")
	select {
	case <-rt.gone:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
