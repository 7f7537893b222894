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
	h.mu.Lock()
	e := h.sessions[p.SessionID]
	h.mu.Unlock()
	if e == nil {
		return api.ReleaseResult{Released: false, Holders: []string{}}, true, nil
	}
	if !e.mu.TryLock() {
		return api.ReleaseResult{}, false, nil
	}
	defer e.mu.Unlock()
	h.mu.Lock()
	gone := e.gone
	h.mu.Unlock()
	if gone {
		return api.ReleaseResult{}, false, nil // forgotten meanwhile: Release looks it up again
	}
	return h.releaseLocked(e, p), true, nil
}

// tryLockLive returns id's entry locked if it is live and its lock was
// free, else nil.
func (h *Host) tryLockLive(id string) *entry {
	h.mu.Lock()
	e := h.sessions[id]
	h.mu.Unlock()
	if e == nil || !e.mu.TryLock() {
		return nil
	}
	h.mu.Lock()
	live := !e.gone && e.state == StateLive
	h.mu.Unlock()
	if !live {
		e.mu.Unlock()
		return nil
	}
	return e
}
