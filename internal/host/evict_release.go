package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/lease"
)

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
