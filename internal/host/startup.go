package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/eviction"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/proc"
)

// Startup names of the daemon's start sequence, in order.
const (
	StepReapOrphans    = "reap-orphans"
	StepCloseOpenTurns = "close-open-turns"
	StepRestore        = "restore"
	StepListen         = "listen"
)

// Startup brings the state left by a previous daemon to rest, then calls
// listen: no orphan survives, no journal ends with an open turn, and no
// child is started (a provider runs only because a surface holds it).
func (h *Host) Startup(ctx context.Context, listen func(context.Context) error) error {
	step := func(name string, run func(ctx context.Context) (string, int, error)) eviction.Step {
		return eviction.Step{Name: name, Run: func(ctx context.Context) error {
			start := time.Now()
			what, n, err := run(ctx)
			h.log.Info("startup step", "step", name, what, n, "ms", time.Since(start).Milliseconds(), "err", err)
			return err
		}}
	}
	steps := []eviction.Step{
		step(StepReapOrphans, h.reapOrphans),
		step(StepCloseOpenTurns, h.closeOpenTurns),
		step(StepRestore, h.restore),
		step(StepListen, func(ctx context.Context) (string, int, error) { return "ok", 1, listen(ctx) }),
	}
	_, err := eviction.Run(ctx, steps)
	return err
}

// reapOrphans stops every process a previous daemon left: the owners of
// its runtime records (startup_runtimes.go), owners of leases still live
// or reserved, and any process carrying one of our tags.
func (h *Host) reapOrphans(ctx context.Context) (string, int, error) {
	leases, err := h.leases.List(func(id string, err error) {
		// Its tagged processes are reaped below as no lease's; the
		// session answers session_damaged until it is deleted.
		h.log.Error("lease record unreadable: the session cannot be held", "session_id", id, "err", err,
			"fix", "sessiond ctl delete "+id)
	})
	if err != nil {
		return "reaped", 0, fmt.Errorf("list leases: %w", err)
	}
	reaped := 0
	// stuck: processes proven unkillable in this startup (a ladder ran out
	// on them). None is laddered again here: each keeps its session's lease
	// and goes to the bounded cleanup, so listen is not held up by them.
	stuck := map[proc.Identity]bool{}
	if h.o.Cgroups != nil {
		// Membership survives the daemon's death: emptying the crashed
		// run's session cgroups stops every process it left, detached or
		// not; the lease loop below then finds the owners gone.
		n, left, err := h.o.Cgroups.ReapStale(ctx, h.stopTimeout())
		if err != nil {
			h.log.Error("stale session cgroups not all emptied", "err", err)
		}
		reaped += n
		for _, id := range left {
			stuck[id] = true
		}
	}
	reap := func(id proc.Identity, tags proc.Tags) proc.Verdict {
		if stuck[id] {
			h.log.Info("not laddered again: proven unkillable in this start", "session_id", tags.SessionID, "pid", id.PID)
			return proc.Verdict{Root: proc.Live, Tree: proc.Live, Survivors: []proc.Identity{id}}
		}
		v := h.reapProc(ctx, h.log, id, tags, h.o.Ladder)
		for _, s := range v.Survivors {
			stuck[s] = true
		}
		return v
	}
	recorded, damagedRT, n, err := h.reapRecordedRuntimes(reap)
	if err != nil {
		return "reaped", reaped, err
	}
	reaped += n
	handled := map[string]bool{} // sessions the lease pass closed
	tagged, scanErr := h.scanTagged(h.st.StateID)
	if scanErr != nil {
		h.log.Warn("cannot enumerate processes: tagged orphans are not checked", "err", scanErr)
	}
	// A per-session child's tree is keyed by its session; a shared
	// runtime's tree carries the runtime's id and no session's, so it is
	// reaped below as tagged processes no lease names.
	bySession := map[string][]proc.Tagged{}
	var byRuntime []proc.Tagged
	for _, t := range tagged {
		if t.RuntimeID != "" {
			byRuntime = append(byRuntime, t)
			continue
		}
		bySession[t.SessionID] = append(bySession[t.SessionID], t)
	}
	for id, rec := range leases {
		if h.adopted(id) {
			delete(bySession, id) // an adopted session's tree is ours
			continue
		}
		if rec.Status == lease.Released {
			continue
		}
		v := proc.Verdict{Root: proc.Exited, Tree: proc.Exited}
		evidence := lease.Evidence{Kind: lease.EvidencePidAbsent, At: h.clock.Now().UTC()}
		if o := rec.Owner; o != nil && o.PID > 0 {
			oid := proc.Identity{PID: o.PID, StartTicks: o.StartTicks, BootID: o.BootID}
			switch proc.Probe(oid) {
			case proc.Alive:
				v = reap(oid, proc.Tags{SessionID: id, Fence: rec.Fence, StateID: h.st.StateID})
				evidence.Kind = lease.EvidenceExitObserved
				reaped++
				h.log.Info("orphan reaped", "session_id", id, "fence", rec.Fence, "pid", o.PID, "root", v.Root.String(), "tree", v.Tree.String())
			case proc.IdentityMismatch:
				evidence.Kind = lease.EvidenceIdentityMismatch
			case proc.BootChanged:
				evidence.Kind = lease.EvidenceBootChanged
			case proc.Unverifiable:
				v.Root = proc.Unverifiable
			}
		}
		for _, t := range bySession[id] {
			tv := reap(t.Identity, proc.Tags{SessionID: id, Fence: t.Fence, StateID: h.st.StateID})
			reaped++
			h.log.Info("tagged orphan reaped", "session_id", id, "fence", t.Fence, "pid", t.PID, "root", tv.Root.String())
			if tv.Root != proc.Exited {
				v.Tree = tv.Root
			}
		}
		delete(bySession, id)
		handled[id] = true
		if v.Root != proc.Exited {
			// Cannot prove the owner gone: keep the lease, never a second owner.
			h.log.Error("orphan not proven gone; lease kept", "session_id", id, "fence", rec.Fence, "root", v.Root.String())
			continue
		}
		reason := event.ReasonDaemonRestart
		if h.diedInHandoffOf(id) {
			reason = event.ReasonProviderExited // it died in a live upgrade; the daemon did not restart
		}
		if err := h.restartTail(ctx, id, v, true, reason); err != nil {
			return "reaped", reaped, err
		}
		if _, err := h.leases.Release(id, rec.Fence, &evidence); err != nil && !errors.Is(err, lease.ErrStaleFence) {
			return "reaped", reaped, fmt.Errorf("session %s: release lease: %w", id, err)
		}
		if _, err := h.j.Append(ctx, id, event.New(event.LeaseReleased, "", map[string]any{"fence": rec.Fence})); err != nil {
			return "reaped", reaped, fmt.Errorf("session %s: %w", id, err)
		}
	}
	if err := h.settleRecordedRuntimes(ctx, recorded, damagedRT, handled, scanErr == nil); err != nil {
		return "reaped", reaped, err
	}
	// Tagged processes of ours that no lease names: a crashed run's
	// runtimes (their owner, when still alive, was reaped above through
	// its sessions' leases) and their detached descendants.
	for _, t := range byRuntime {
		if h.adopted(t.RuntimeID) || stuck[t.Identity] {
			continue
		}
		v := reap(t.Identity, t.Tags(h.st.StateID))
		reaped++
		h.log.Info("tagged orphan reaped", "runtime_id", t.RuntimeID, "pid", t.PID, "root", v.Root.String())
	}
	for id, ts := range bySession {
		if h.adopted(id) {
			continue
		}
		for _, t := range ts {
			v := reap(t.Identity, proc.Tags{SessionID: id, Fence: t.Fence, StateID: h.st.StateID})
			reaped++
			h.log.Info("tagged orphan reaped", "session_id", id, "pid", t.PID, "root", v.Root.String())
		}
	}
	// A process being stopped may have forked one more tagged descendant
	// after our scan: scan again until a pass finds none (bounded). When
	// nothing was stopped (a live upgrade's start, a clean one) nothing
	// can have forked since the scan.
	for pass := 0; pass < 3 && scanErr == nil && reaped > 0; pass++ {
		late, err := h.scanTagged(h.st.StateID)
		late = slices.DeleteFunc(late, func(t proc.Tagged) bool { return h.adopted(t.Tags("").Owner()) || stuck[t.Identity] })
		if err != nil || len(late) == 0 {
			break
		}
		for _, t := range late {
			v := reap(t.Identity, t.Tags(h.st.StateID))
			reaped++
			h.log.Info("tagged orphan reaped", "session_id", t.SessionID, "runtime_id", t.RuntimeID, "pid", t.PID, "root", v.Root.String(), "pass", pass+1)
		}
	}
	if len(stuck) > 0 {
		ids := make([]proc.Identity, 0, len(stuck))
		for id := range stuck {
			ids = append(ids, id)
		}
		h.log.Error("processes of a previous run not proven gone; bounded cleanup takes them", "count", len(ids))
		h.cleanup.Add(proc.Tags{StateID: h.st.StateID}, ids)
	}
	h.count(func(c *counters) { c.orphans += reaped })
	return "reaped", reaped, nil
}

// restartTail journals the end of a session the daemon lost: its open
// approvals cancelled, its open items and the open turn interrupted, provider.exited (unless withExit is false) and session.ended,
// all with reason (daemon_restart; provider_exited for a provider that
// died during a live upgrade's handover).
func (h *Host) restartTail(ctx context.Context, id string, v proc.Verdict, withExit bool, reason string) error {
	st := h.j.State(id)
	tail := append(cancelApprovals(st, reason), h.interruptItems(id, st)...)
	if st.OpenTurn != "" {
		tail = append(tail, event.New(event.TurnCompleted, st.OpenTurn, event.TurnCompletedData{
			Status: event.StatusInterrupted, Reason: reason}))
	}
	if withExit {
		tail = append(tail, event.New(event.ProviderExited, "", event.ProviderExitedData{
			Root: v.Root.String(), Tree: v.Tree.String(), Code: v.Code, Expected: false}))
	}
	tail = append(tail, event.New(event.SessionEnded, "", event.SessionEndedData{Reason: reason}))
	if _, err := h.j.Append(ctx, id, tail...); err != nil {
		return fmt.Errorf("session %s: journal restart tail: %w", id, err)
	}
	return nil
}

// diedInHandoffOf: id's handed-over process exited before Adopt.
func (h *Host) diedInHandoffOf(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.diedInHandoff[id]
}

// closeOpenTurns completes any other journal that still ends with an open
// turn (defensive: reap-orphans should have left none), and journals the
// lease.released of a session whose lease was released but whose daemon
// died before journaling it (a kill between the release-lease step's store
// write and its journal append leaves a journal ending in session.ended).
func (h *Host) closeOpenTurns(ctx context.Context) (string, int, error) {
	leases, err := h.leases.List(nil) // damaged ones: logged by reapOrphans
	if err != nil {
		return "closed", 0, fmt.Errorf("list leases: %w", err)
	}
	n := 0
	for _, id := range h.j.Sessions() {
		if h.adopted(id) {
			continue // its turn is running in the adopted child
		}
		st := h.j.State(id)
		if st.OpenTurn != "" {
			if err := h.restartTail(ctx, id, proc.Verdict{}, false, event.ReasonDaemonRestart); err != nil {
				return "closed", n, err
			}
			n++
			continue
		}
		rec, ok := leases[id]
		if !ok || rec.Status != lease.Released || st.LastSeq == 0 {
			continue
		}
		last, _, _, err := h.j.Read(id, st.LastSeq-1, 1)
		if err != nil {
			h.log.Warn("cannot read a journal's last event", "session_id", id, "err", err)
			continue
		}
		if len(last) != 1 || last[0].Type != event.SessionEnded {
			continue
		}
		if _, err := h.j.Append(ctx, id, event.New(event.LeaseReleased, "", map[string]any{"fence": rec.Fence})); err != nil {
			return "closed", n, fmt.Errorf("session %s: %w", id, err)
		}
		h.log.Info("journaled a missing lease.released", "session_id", id, "fence", rec.Fence)
		n++
	}
	return "closed", n, nil
}

// restore checks the records are readable; no child is started.
func (h *Host) restore(ctx context.Context) (string, int, error) {
	bad := 0
	recs, err := h.st.ListRecords(func(id string, err error) {
		bad++
		h.log.Error("session record unreadable", "session_id", id, "err", err, "fix", "sessiond ctl delete "+id)
	})
	if err != nil {
		return "sessions", 0, fmt.Errorf("list records: %w", err)
	}
	return "sessions", len(recs), nil
}
