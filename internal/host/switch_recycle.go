package host

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
)

// A switch to an account whose runtime still has a stale copy of the
// thread loaded and serves other sessions is queued (account.switch_queued
// {reason: thread_busy}) until that runtime is recycled: once none of its
// sessions runs a turn, each is taken off it (session.ended {reason:
// runtime_recycle}) and kept locked, the runtime is stopped, and each
// starts again at once on a new runtime of its account, resuming its
// thread, its holds kept; then the queued switches are applied. A switch
// with when "now" is thread_busy instead (switch.go).

// recycleBusy queues session id's switch behind rt's recycle, starting it
// unless it already runs. Needs id's session lock.
func (h *Host) recycleBusy(rt *sharedRuntime, id string) {
	rt.mu.Lock()
	if rt.waiters == nil {
		rt.waiters = map[string]bool{}
	}
	rt.waiters[id] = true
	running := rt.recycling
	rt.recycling = true
	rt.mu.Unlock()
	if running {
		return
	}
	h.log.Info("recycling a runtime that keeps a stale copy of a switching thread, once it runs no turn", "runtime_id", rt.id, "session_id", id)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.runRecycle(rt)
	}()
}

// runRecycle recycles rt once no session of it runs a turn, then applies
// the switches queued behind it.
func (h *Host) runRecycle(rt *sharedRuntime) {
	for h.starts.Err() == nil {
		busy, locked := h.lockIdleBound(rt)
		if busy != "" {
			h.awaitTurnEnd(busy)
			continue
		}
		h.restartOffRuntime(rt, locked)
		break
	}
	rt.mu.Lock()
	waiters := slices.Sorted(maps.Keys(rt.waiters))
	rt.waiters, rt.recycling = nil, false
	rt.mu.Unlock()
	for _, id := range waiters {
		h.applyQueuedAfterRecycle(id)
	}
}

// lockIdleBound locks every live session bound to rt, in id order. When
// one runs a turn it unlocks them all and names that session.
func (h *Host) lockIdleBound(rt *sharedRuntime) (string, []*entry) {
	rt.mu.Lock()
	ids := slices.Sorted(maps.Keys(rt.sessions))
	rt.mu.Unlock()
	var locked []*entry
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(h.starts, h.o.StartTimeout+h.evictBound())
		e, err := h.lockEntry(ctx, id, false)
		cancel()
		if err != nil || e == nil {
			continue
		}
		h.mu.Lock()
		mine := e.rt == rt && e.state == StateLive && !e.gone
		h.mu.Unlock()
		if !mine {
			e.mu.Unlock()
			continue
		}
		locked = append(locked, e)
		if h.j.State(id).OpenTurn != "" {
			for _, l := range locked {
				l.mu.Unlock()
			}
			return id, nil
		}
	}
	return "", locked
}

// awaitTurnEnd waits until session id runs no turn (its turn.completed).
func (h *Host) awaitTurnEnd(id string) {
	for h.starts.Err() == nil {
		st := h.j.State(id)
		if st.OpenTurn == "" {
			return
		}
		snap, _, _, sub, err := h.j.Subscribe(id, st.LastSeq, 4096)
		if err != nil {
			return
		}
		done := slices.ContainsFunc(snap, func(ev event.Event) bool { return ev.Type == event.TurnCompleted })
		for !done {
			ev, err := sub.Next(h.starts)
			if errors.Is(err, journal.ErrLagged) {
				break
			}
			if err != nil {
				sub.Close()
				return
			}
			done = ev.Type == event.TurnCompleted
		}
		sub.Close()
	}
}

// restartOffRuntime takes each of locked (rt's idle sessions, locked)
// off rt, stops rt, and starts each again on a new runtime of its
// account; it unlocks them all.
func (h *Host) restartOffRuntime(rt *sharedRuntime, locked []*entry) {
	ctx := context.WithoutCancel(h.starts)
	h.mu.Lock()
	if h.runtimes[rt.key] == rt {
		delete(h.runtimes, rt.key) // the sessions start again on a new one
	}
	h.mu.Unlock()
	type moved struct {
		succ  *entry
		holds []savedHold
	}
	var off []moved
	for _, e := range locked {
		holds := h.snapshotHolds(e)
		succ := h.successorOf(e)
		if _, err := h.evictLocked(ctx, e, evictRecycle); err != nil {
			h.mu.Lock()
			e.successor = nil
			h.mu.Unlock()
			succ.mu.Unlock()
			h.scheduleRetryLocked(e, evictRecycle)
			e.mu.Unlock()
			h.log.Warn("recycle: taking a session off the runtime failed", "runtime_id", rt.id, "session_id", e.id, "err", err)
			continue
		}
		e.mu.Unlock()
		off = append(off, moved{succ, holds})
	}
	h.evictRuntime(rt, "recycle")
	wait, cancel := context.WithTimeout(h.starts, h.evictBound())
	select {
	case <-rt.gone:
	case <-wait.Done():
		h.log.Warn("recycle: the runtime is not gone yet", "runtime_id", rt.id)
	}
	cancel()
	for _, m := range off {
		h.restoreHolds(m.succ, m.holds)
		if err := h.startLocked(h.starts, m.succ); err != nil { // a shutdown cancels it
			h.log.Warn("recycle: a session did not start again on its account", "runtime_id", rt.id, "session_id", m.succ.id, "err", err)
		} else {
			h.settleHoldsLocked(m.succ)
		}
		m.succ.mu.Unlock()
	}
}

// applyQueuedAfterRecycle applies session id's queued switch once the
// runtime it waited for is recycled (a running turn's end applies it
// otherwise).
func (h *Host) applyQueuedAfterRecycle(id string) {
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
	if !live || e.rec.PendingSwitch == nil || e.sink.Drain(ctx) != nil || h.j.State(id).OpenTurn != "" {
		return
	}
	cur = h.applyPendingLocked(ctx, e, h.o.Providers[e.rec.Provider], true)
}
