package host

import (
	"context"
	"fmt"
)

// sessionLock is a session's lock. Unlike a sync.Mutex, a wait for it
// honours the caller's context: a hold gives up at its own deadline, and
// shutdown at its bound, behind a session busy with a stuck step.
type sessionLock chan struct{}

func newSessionLock() sessionLock { return make(sessionLock, 1) }

// Lock waits for the lock as long as it takes (a teardown that must run).
func (l sessionLock) Lock() { l <- struct{}{} }

// LockCtx waits for the lock until ctx ends.
func (l sessionLock) LockCtx(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	default:
	}
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TryLock takes the lock only if it is free.
func (l sessionLock) TryLock() bool {
	select {
	case l <- struct{}{}:
		return true
	default:
		return false
	}
}

// Unlock releases the lock.
func (l sessionLock) Unlock() { <-l }

// lockEntry looks up (or, with create, inserts) the entry of id and takes
// its session lock, retrying when the entry was forgotten while waiting.
// It returns nil when there is no entry and create is false, and ctx's
// error (naming the session) when ctx ends first.
func (h *Host) lockEntry(ctx context.Context, id string, create bool) (*entry, error) {
	for {
		h.mu.Lock()
		e := h.sessions[id]
		if e == nil {
			if !create {
				h.mu.Unlock()
				return nil, nil
			}
			e = newEntry(id, StateStored)
			h.sessions[id] = e
		}
		h.mu.Unlock()
		if err := e.mu.LockCtx(ctx); err != nil {
			return nil, fmt.Errorf("session %s: waiting for the session lock: %w", id, err)
		}
		h.mu.Lock()
		gone := e.gone
		h.mu.Unlock()
		if !gone {
			return e, nil
		}
		e.mu.Unlock()
	}
}
