package host

import (
	"github.com/sessiond/sessiond/internal/api"
)

// Hold and release without waiting (api.InlineBackend): rpc asks these
// first, on the connection's reading goroutine, and queues the call for
// Hold or Release when they answer ok false. They answer only what Hold
// and Release would answer in the same state: a session whose entry is
// live with its lock free (a hold), or whose entry is absent or has its
// lock free (a release); a session that is starting, exiting or being
// evicted, or whose lock another call holds, is left to the queue. Each
// check is the one Hold or Release makes, in the same order.

// HoldNow is Hold when the session is live and its lock is free.
func (h *Host) HoldNow(conn string, p api.HoldParams) (api.HoldResult, bool, error) {
	if err := h.exists(p.SessionID); err != nil {
		return api.HoldResult{}, true, err
	}
	e := h.tryLockLive(p.SessionID)
	if e == nil {
		return api.HoldResult{}, false, nil
	}
	defer e.mu.Unlock()
	if err := h.connBegin(conn, true); err != nil {
		return api.HoldResult{}, true, err
	}
	defer h.connEnd(conn)
	return h.holdLocked(e, conn, p), true, nil
}

// ReleaseNow is Release when the session has no entry or its lock is
// free.
func (h *Host) ReleaseNow(conn string, p api.ReleaseParams) (api.ReleaseResult, bool, error) {
	if err := h.exists(p.SessionID); err != nil {
		return api.ReleaseResult{}, true, err
	}
	e, absent := h.tryLockEntry(p.SessionID)
	if absent {
		return api.ReleaseResult{Released: false, Holders: []string{}}, true, nil
	}
	if e == nil {
		return api.ReleaseResult{}, false, nil // another call holds its lock, or it was forgotten meanwhile
	}
	defer e.mu.Unlock()
	return h.releaseLocked(e, p), true, nil
}

// tryLockEntry returns id's entry locked if its lock was free and it was
// not forgotten meanwhile (Release would look it up again), else nil;
// absent: the session has no entry.
func (h *Host) tryLockEntry(id string) (e *entry, absent bool) {
	h.mu.Lock()
	e = h.sessions[id]
	h.mu.Unlock()
	if e == nil {
		return nil, true
	}
	if !e.mu.TryLock() {
		return nil, false
	}
	h.mu.Lock()
	gone := e.gone
	h.mu.Unlock()
	if gone {
		e.mu.Unlock()
		return nil, false
	}
	return e, false
}

// tryLockLive is tryLockEntry of a live session only, else nil.
func (h *Host) tryLockLive(id string) *entry {
	e, _ := h.tryLockEntry(id)
	if e == nil {
		return nil
	}
	h.mu.Lock()
	live := e.state == StateLive
	h.mu.Unlock()
	if !live {
		e.mu.Unlock()
		return nil
	}
	return e
}
