package host

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/store"
)

// A shared runtime's record in the store (store.RuntimeRecord,
// runtimes/<runtimeId>): written once its process is spawned, before
// any thread starts on it; its bound sessions rewritten on each bind and
// unbind; deleted when the runtime is forgotten with its tree proven
// gone. Startup (startup_runtimes.go) reaps a crashed run's runtimes by
// these records, also when the /proc tag scan cannot run, and closes the
// sessions they name. A live upgrade hands the store over with its
// records: an adopted runtime keeps its record.

// putRuntimeRecord writes rt's record for child, its process just
// spawned. The record lock is taken first, then the runtime's.
func (h *Host) putRuntimeRecord(rt *sharedRuntime, child *proc.Child) error {
	rt.recMu.Lock()
	defer rt.recMu.Unlock()
	id := child.Identity()
	rt.mu.Lock()
	rec := store.RuntimeRecord{ID: rt.id, Profile: rt.key.profile, Account: rt.key.account,
		Owner:    store.RuntimeOwner{PID: id.PID, StartTicks: id.StartTicks, BootID: id.BootID, SpawnToken: newID("t_")},
		Sessions: slices.Collect(maps.Keys(rt.sessions)), StartedAt: rt.startedAt}
	rt.mu.Unlock()
	if err := h.st.PutRuntime(rec); err != nil {
		return fmt.Errorf("runtime %s: write its record: %w", rt.id, err)
	}
	rt.recorded = true
	return nil
}

// syncRuntimeRecord rewrites the bound sessions of rt's record with the
// set bound now (a later call always writes a later set: the record lock
// orders them). A write that fails is logged: each bound session's lease
// still names the runtime's process, so startup closes it all the same.
func (h *Host) syncRuntimeRecord(rt *sharedRuntime) {
	rt.recMu.Lock()
	defer rt.recMu.Unlock()
	if !rt.recorded {
		return
	}
	rt.mu.Lock()
	ids := slices.Collect(maps.Keys(rt.sessions))
	rt.mu.Unlock()
	if err := h.st.SetRuntimeSessions(rt.id, ids); err != nil {
		h.log.Error("runtime record not updated", "runtime_id", rt.id, "sessions", len(ids), "err", err)
	}
}

// deleteRuntimeRecord deletes rt's record once its process tree is
// proven gone (v); a tree not proven gone keeps it (the next startup
// reaps by it), logged.
func (h *Host) deleteRuntimeRecord(rt *sharedRuntime, v *proc.Verdict) {
	rt.recMu.Lock()
	defer rt.recMu.Unlock()
	if !rt.recorded {
		return
	}
	if v == nil || v.Root != proc.Exited || v.Tree != proc.Exited {
		h.log.Warn("runtime record kept: its tree is not proven gone", "runtime_id", rt.id)
		return
	}
	if err := h.st.DeleteRuntime(rt.id); err != nil && !errors.Is(err, store.ErrNotFound) {
		h.log.Error("runtime record not deleted; the next startup finds its owner gone and deletes it", "runtime_id", rt.id, "err", err)
		return
	}
	rt.recorded = false
}

// adoptRuntimeRecord takes over the record of a handed-over runtime (the
// store is the same file across the exec): it stays, and this image
// rewrites and deletes it. A runtime handed over without one (the
// previous image kept none) gets one now.
func (h *Host) adoptRuntimeRecord(rt *sharedRuntime, child *proc.Child) error {
	_, err := h.st.GetRuntime(rt.id)
	switch {
	case err == nil:
		rt.recMu.Lock()
		rt.recorded = true
		rt.recMu.Unlock()
		return nil
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrDamaged):
		return h.putRuntimeRecord(rt, child)
	}
	return fmt.Errorf("runtime %s: read its record: %w", rt.id, err)
}

// StaleRuntimeRecord is a runtime record no runtime of this daemon is:
// its owner not proven gone at a teardown or at startup (Owner "alive",
// "exited", …: proc.Probe's answer now), or one that does not decode.
type StaleRuntimeRecord struct {
	RuntimeID string `json:"runtimeId"`
	PID       int    `json:"pid,omitempty"`
	Owner     string `json:"owner,omitempty"`
	Damaged   bool   `json:"damaged,omitempty"`
}

// staleRuntimeRecords lists the runtime records of no runtime in the map
// (never nil).
func (h *Host) staleRuntimeRecords() []StaleRuntimeRecord {
	out := []StaleRuntimeRecord{}
	recs, err := h.st.ListRuntimes(func(id string, _ error) {
		out = append(out, StaleRuntimeRecord{RuntimeID: id, Damaged: true})
	})
	if err != nil {
		return out
	}
	h.mu.Lock()
	live := map[string]bool{}
	for _, rt := range h.runtimes {
		live[rt.id] = true
	}
	h.mu.Unlock()
	for _, r := range recs {
		if live[r.ID] {
			continue
		}
		o := r.Owner
		state := proc.Probe(proc.Identity{PID: o.PID, StartTicks: o.StartTicks, BootID: o.BootID})
		out = append(out, StaleRuntimeRecord{RuntimeID: r.ID, PID: o.PID, Owner: state.String()})
	}
	return out
}
