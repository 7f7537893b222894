package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/proc"
)

// Adopt rebuilds the map from a live upgrade's handoff, before Startup:
// each session's child is adopted around its inherited pipes (no spawn,
// no handshake, no thread resume), its adapter rebuilt from the paused
// state, its exit watched and its release clock armed at the handed-over
// time. Startup then leaves these sessions alone (their leases are live
// and their children are ours). Any error means the image cannot take
// over: the caller exits and the next start reaps as after a crash.
//
// Sessions are adopted side by side (adoptWorkers at a time): each waits
// on its own store reads, /proc and cgroup files, and the new image
// accepts only once all are adopted.
func (h *Host) Adopt(ctx context.Context, sessions []HandoffSession) error {
	work := make(chan HandoffSession)
	errs := make([]error, min(adoptWorkers(), len(sessions)))
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if errs[i] != nil {
					continue // drain: the image exits anyway
				}
				if err := ctx.Err(); err != nil {
					errs[i] = err
				} else if err := h.adoptOne(s); err != nil {
					errs[i] = fmt.Errorf("adopt session %s: %w", s.ID, err)
				}
			}
		}()
	}
	for _, s := range sessions {
		work <- s
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// adoptWorkers is how many sessions Adopt adopts at a time.
func adoptWorkers() int { return 2 * runtime.GOMAXPROCS(0) }

func (h *Host) adoptOne(s HandoffSession) error {
	rec, err := h.record(s.ID)
	if err != nil {
		return err
	}
	prov, ok := h.o.Providers[rec.Provider]
	if !ok || prov.Adopt == nil {
		return fmt.Errorf("provider %q is not configured or cannot adopt", rec.Provider)
	}
	lr, err := h.leases.Get(s.ID)
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if lr.Status != lease.Live || lr.Fence != s.Fence || lr.Owner == nil || lr.Owner.PID != s.Child.PID {
		return fmt.Errorf("lease (%s, fence %d) does not name the handed-over child %d at fence %d",
			lr.Status, lr.Fence, s.Child.PID, s.Fence)
	}
	e := newEntry(s.ID, StateLive)
	e.sink = h.j.Sink(s.ID)
	child, err := proc.Adopt(s.Child, h.o.Cgroups, h.onLimit(e, e.sink), h.log)
	if err != nil {
		e.sink.Close(context.Background())
	}
	if errors.Is(err, proc.ErrChildGone) {
		// It exited between the handoff and now: its session is closed
		// by reap-orphans as after a crash (pid-absent evidence).
		h.log.Warn("handed-over provider exited before adoption; its session is closed as after a crash",
			"session_id", s.ID, "pid", s.Child.PID, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	e.rec, e.token, e.tailDone, e.child = rec, lr.Owner.SpawnToken, map[string]bool{}, child
	a, err := prov.Adopt(h.adapterOptions(e, child, s.Fence, s.ThreadID), s.Adapter)
	if err != nil {
		return err
	}
	e.adapter = a
	h.mu.Lock()
	defer h.mu.Unlock()
	e.fence, e.pid, e.threadID, e.stopper = s.Fence, s.Child.PID, s.ThreadID, a
	h.sessions[s.ID] = e
	h.armMapLocked(e, max(s.ReleaseAt.Sub(h.clock.Now()), 0))
	h.wg.Add(1)
	go h.watch(e, child, a.Done())
	h.log.Info("session adopted", "session_id", s.ID, "fence", s.Fence, "pid", s.Child.PID,
		"thread_id", s.ThreadID, "unparsed_bytes", len(s.Adapter.Unparsed), "release_at", s.ReleaseAt)
	return nil
}

// adoptedMapLocked reports whether id was adopted from a handoff (Startup
// must neither reap its child nor close its open turn). Needs the map lock.
func (h *Host) adoptedMapLocked(id string) bool {
	e := h.sessions[id]
	return e != nil && e.child != nil
}

func (h *Host) adopted(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.adoptedMapLocked(id)
}
