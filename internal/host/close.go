package host

import (
	"context"
	"errors"

	"github.com/sessiond/sessiond/internal/api"
)

// Close drops every hold and runs the eviction steps now. The record and
// journal stay; a later hold resumes the provider thread. After a failure
// the session stays indexed with its child loaded, the daemon retries with
// backoff, and a later Close retries at once. A session whose record is
// damaged on disk is closed too: its child must not outlive the damage
// (delete, doctor's fix, then removes it).
func (h *Host) Close(ctx context.Context, id string) (api.CloseResult, error) {
	if err := h.exists(id); err != nil && !errors.Is(err, api.ErrSessionDamaged) {
		return api.CloseResult{}, err
	}
	// A send blocked on a provider that stopped reading holds the session
	// lock: end its write first (the close stops that child anyway).
	h.mu.Lock()
	if e := h.sessions[id]; e != nil && (e.state == StateLive || e.state == StateExited) {
		h.beginStopMapLocked(e)
	}
	h.mu.Unlock()
	e, err := h.lockEntry(ctx, id, false)
	if err != nil {
		return api.CloseResult{}, err
	}
	if e == nil {
		return api.CloseResult{Steps: []api.StepResult{}}, nil
	}
	defer e.mu.Unlock()
	h.mu.Lock()
	for holder, hd := range e.holds {
		h.dropHoldMapLocked(e, holder, hd.token, "close")
	}
	h.disarmMapLocked(e)
	live := e.state == StateLive || e.state == StateExited
	h.mu.Unlock()
	if !live {
		return api.CloseResult{Steps: []api.StepResult{}}, nil
	}
	steps, err := h.evictLocked(context.WithoutCancel(ctx), e, evictClosed)
	if err != nil {
		h.scheduleRetryLocked(e, evictClosed)
		return api.CloseResult{Steps: steps}, err
	}
	return api.CloseResult{Steps: steps}, nil
}
