package host

import (
	"context"
	"fmt"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/store"
)

// recordedRuntime is a crashed run's runtime found by its store record,
// with what reaping its owner proved.
type recordedRuntime struct {
	rec store.RuntimeRecord
	v   proc.Verdict
}

// reapRecordedRuntimes is reap-orphans' first pass: every runtime record
// not of an adopted runtime names a crashed run's runtime, whose owner
// is reaped by its recorded identity (no /proc scan needed: it is found
// also when the tag scan cannot run). A record that does not decode is
// logged, naming its runtime; its processes are left to the tag scan
// (damaged reports whether there was one).
func (h *Host) reapRecordedRuntimes(reap func(proc.Identity, proc.Tags) proc.Verdict) (out []recordedRuntime, damaged []string, reaped int, err error) {
	recs, err := h.st.ListRuntimes(func(id string, err error) {
		damaged = append(damaged, id)
		h.log.Error("runtime record unreadable: its runtime is reaped by the tag scan only", "runtime_id", id, "err", err,
			"fix", "run sessiond ctl doctor")
	})
	if err != nil {
		return nil, damaged, 0, fmt.Errorf("list runtime records: %w", err)
	}
	for _, r := range recs {
		if h.adopted(r.ID) {
			continue // handed over: its process is ours, its record stays
		}
		v := proc.Verdict{Root: proc.Exited, Tree: proc.Exited}
		oid := proc.Identity{PID: r.Owner.PID, StartTicks: r.Owner.StartTicks, BootID: r.Owner.BootID}
		probe := proc.Probe(oid)
		switch {
		case r.Owner.PID <= 0:
		case probe == proc.Alive:
			v = reap(oid, proc.Tags{RuntimeID: r.ID, StateID: h.st.StateID})
			reaped++
			h.log.Info("orphan runtime reaped by its record", "runtime_id", r.ID, "pid", r.Owner.PID,
				"root", v.Root.String(), "tree", v.Tree.String())
		case probe == proc.Unverifiable:
			v.Root, v.Tree = proc.Unverifiable, proc.Unverifiable
		}
		out = append(out, recordedRuntime{rec: r, v: v})
	}
	return out, damaged, reaped, nil
}

// settleRecordedRuntimes is reap-orphans' last pass over the records:
// each session a record names that the lease pass did not close (handled)
// gets its tail unless its journal already ended, then the record is
// deleted when its owner is proven gone (kept, logged, when not). A
// damaged record is deleted only when the tag scan ran (scanned): then
// every process it could name was found by its tags.
func (h *Host) settleRecordedRuntimes(ctx context.Context, rts []recordedRuntime, damaged []string, handled map[string]bool, scanned bool) error {
	for _, r := range rts {
		if r.v.Root == proc.Exited { // its process is gone: its sessions end
			for _, id := range r.rec.Sessions {
				if handled[id] || h.adopted(id) || !h.journalOpen(id) {
					continue
				}
				reason := event.ReasonDaemonRestart
				if h.diedInHandoffOf(id) {
					reason = event.ReasonProviderExited // it died in a live upgrade
				}
				if err := h.restartTail(ctx, id, r.v, true, reason); err != nil {
					return err
				}
				handled[id] = true
				h.log.Info("session closed by its runtime's record", "session_id", id, "runtime_id", r.rec.ID)
			}
		}
		if r.v.Root != proc.Exited || r.v.Tree != proc.Exited {
			h.log.Error("orphan runtime not proven gone; its record is kept", "runtime_id", r.rec.ID, "pid", r.rec.Owner.PID,
				"root", r.v.Root.String(), "tree", r.v.Tree.String())
			continue
		}
		if err := h.st.DeleteRuntime(r.rec.ID); err != nil {
			return fmt.Errorf("runtime %s: delete its record: %w", r.rec.ID, err)
		}
	}
	for _, id := range damaged {
		if !scanned {
			h.log.Error("damaged runtime record kept: the tag scan could not run", "runtime_id", id)
			continue
		}
		if err := h.st.DeleteRuntime(id); err != nil {
			return fmt.Errorf("runtime %s: delete its damaged record: %w", id, err)
		}
		h.log.Warn("damaged runtime record deleted: the tag scan reaped its processes", "runtime_id", id)
	}
	return nil
}

// journalOpen reports whether id's journal has events and does not end
// with its session's end (session.ended, lease.released).
func (h *Host) journalOpen(id string) bool {
	st := h.j.State(id)
	if st.LastSeq == 0 {
		return false
	}
	last, _, _, err := h.j.Read(id, st.LastSeq-1, 1)
	if err != nil || len(last) != 1 {
		return st.OpenTurn != ""
	}
	return last[0].Type != event.SessionEnded && last[0].Type != event.LeaseReleased
}
