package host

import (
	"context"
	"sort"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// Hold takes (or renews) holderId's hold on a session, starting its
// provider child when none runs, and returns once the child is ready.
func (h *Host) Hold(ctx context.Context, conn string, p api.HoldParams) (api.HoldResult, error) {
	if err := h.exists(p.SessionID); err != nil {
		return api.HoldResult{}, err
	}
	if err := h.connBegin(conn, true); err != nil {
		return api.HoldResult{}, err
	}
	defer h.connEnd(conn)

	e, err := h.lockLiveEntry(ctx, p.SessionID)
	if err != nil {
		return api.HoldResult{}, err
	}
	defer e.mu.Unlock()
	return h.holdLocked(e, conn, p), nil
}

// holdLocked takes or renews p's hold on e, live and locked, for conn.
func (h *Host) holdLocked(e *entry, conn string, p api.HoldParams) api.HoldResult {
	var ttl time.Duration
	if p.TTLMs != nil {
		ttl = time.Duration(*p.TTLMs) * time.Millisecond
	}
	token := newID("h_")
	res := api.HoldResult{SessionID: e.id, State: "live", HoldToken: token}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.holds++
	hd := e.holds[p.HolderID]
	if hd == nil {
		hd = &hold{}
		e.holds[p.HolderID] = hd
	} else if cs := h.conns[hd.conn]; cs != nil {
		cs.holds--
	}
	if hd.ttl != nil {
		hd.ttl.Stop()
		hd.ttl = nil
	}
	hd.conn, hd.token, hd.ttlAt = conn, token, time.Time{}
	h.conns[conn].holds++
	if ttl > 0 {
		hd.ttlAt = h.clock.Now().Add(ttl)
		holder := p.HolderID
		hd.ttl = h.clock.AfterFunc(ttl, func() { h.dropHold(e, holder, token, "ttl") })
	}
	h.disarmMapLocked(e)
	res.Fence, res.PID, res.ThreadID = e.fence, e.pid, e.threadID
	res.Holders = holderIDs(e)
	if h.conns[conn].closed {
		// The connection closed before its hold completed: drop it at once.
		h.dropHoldMapLocked(e, p.HolderID, token, "disconnect")
	}
	return res
}

// lockLiveEntry returns the session's entry, locked, with a ready child:
// it waits out an eviction in progress, finishes the teardown of a child
// that exited on its own, and starts a child when none runs.
func (h *Host) lockLiveEntry(ctx context.Context, id string) (*entry, error) {
	for {
		e, err := h.lockEntry(ctx, id, true)
		if err != nil {
			return nil, err
		}
		switch e.state {
		case StateExited:
			_, err := h.evictLocked(context.WithoutCancel(ctx), e, evictExited)
			if err != nil {
				h.scheduleRetryLocked(e, evictExited)
			}
			e.mu.Unlock()
			if err != nil {
				return nil, err
			}
			continue
		case StateStored:
			if err := h.startLocked(ctx, e); err != nil {
				e.mu.Unlock()
				return nil, err
			}
		}
		return e, nil
	}
}

// Release drops holderId's hold. Idempotent: an unknown holder, or a token
// of an older incarnation, is released:false and changes nothing.
func (h *Host) Release(ctx context.Context, conn string, p api.ReleaseParams) (api.ReleaseResult, error) {
	if err := h.exists(p.SessionID); err != nil {
		return api.ReleaseResult{}, err
	}
	// The session lock queues a release behind a hold still starting the
	// child (a pipelined hold+release must not overtake it).
	e, err := h.lockEntry(ctx, p.SessionID, false)
	if err != nil {
		return api.ReleaseResult{}, err
	}
	if e == nil {
		return api.ReleaseResult{Released: false, Holders: []string{}}, nil
	}
	defer e.mu.Unlock()
	return h.releaseLocked(e, p), nil
}

// releaseLocked drops p's hold of e, locked.
func (h *Host) releaseLocked(e *entry, p api.ReleaseParams) api.ReleaseResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	released := h.dropHoldMapLocked(e, p.HolderID, p.HoldToken, "release")
	return api.ReleaseResult{Released: released, Holders: holderIDs(e), ReleaseAt: e.releaseAt}
}

// dropHold is dropHoldMapLocked taking the map lock (timer callbacks).
func (h *Host) dropHold(e *entry, holder, token, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropHoldMapLocked(e, holder, token, why)
}

// dropHoldMapLocked removes holder from e if its token matches (empty token:
// any) and arms the release clock when the set empties. Needs the map lock.
func (h *Host) dropHoldMapLocked(e *entry, holder, token, why string) bool {
	hd := e.holds[holder]
	if hd == nil || (token != "" && hd.token != token) {
		return false
	}
	if hd.ttl != nil {
		hd.ttl.Stop()
	}
	if cs := h.conns[hd.conn]; cs != nil {
		cs.holds--
	}
	delete(e.holds, holder)
	h.stats.releases++
	h.log.Debug("hold dropped", "session_id", e.id, "holder", holder, "why", why)
	if len(e.holds) == 0 && !e.gone {
		h.armMapLocked(e, h.o.IdleTimeout)
	}
	return true
}

func holderIDs(e *entry) []string {
	out := make([]string, 0, len(e.holds))
	for id := range e.holds {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
