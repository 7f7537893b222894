package ctl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/store"
	"github.com/sessiond/sessiond/internal/tty"
)

// fixServe is the fix for anything a dead daemon left: startup reaps,
// closes open turns and releases leases before it listens.
func fixServe() string { return "run `" + selfServe() + "` once: startup reaps and releases" }

// doctorOffline inspects the state directory read-only when no daemon
// answers on the socket. A store still locked means a daemon runs on it
// elsewhere (another socket): nothing can be checked.
func doctorOffline(e *ctlEnv, rep *DoctorReport) {
	dir, err := config.StateDir(doctorStateDir, os.Getenv)
	if err != nil {
		rep.add(DoctorCheck{Name: "store", Unknown: true, Detail: err.Error()})
		return
	}
	rep.StateDir = dir
	st, err := store.OpenReadOnly(dir, 2*time.Second)
	var refused *store.RefusalError
	switch {
	case errors.As(err, &refused):
		// Nothing in the file can be trusted; the marker still names the
		// state id, so its processes can be found.
		rep.add(DoctorCheck{Name: "store", Detail: refused.Path,
			Problems: []DoctorProblem{{What: refused.Error(), Fix: refused.Fix}}})
		rep.StateID = store.MarkerStateID(dir)
		rep.add(doctorTagged(rep.StateID, func(proc.Tagged) bool { return false },
			func(t proc.Tagged) string { return fmt.Sprintf("kill %d", t.PID) }))
		return
	case errors.Is(err, store.ErrLocked):
		rep.add(DoctorCheck{Name: "store", Unknown: true,
			Detail: fmt.Sprintf("%s is locked: a sessiond runs on this state dir but not on %s (pass its --socket)", filepath.Join(dir, "sessiond.db"), e.socket)})
		return
	case err != nil:
		rep.add(DoctorCheck{Name: "store", Unknown: true, Detail: err.Error()})
		return
	}
	defer st.Close()
	detail := st.Path + ": meta pages, page walk and bbolt consistency check passed"
	for _, w := range st.Warnings {
		detail += "; warning: " + w
	}
	check := DoctorCheck{Name: "store", Detail: detail}
	if p := notWritable(dir, st.Path); p != nil {
		check.Problems = append(check.Problems, *p)
	}
	rep.add(check)
	db := st.DB
	var version uint64
	db.View(func(tx *bolt.Tx) error { version = store.Version(tx); return nil })
	stateID := st.StateID
	rep.StateID = stateID
	schema := DoctorCheck{Name: "schema", Detail: fmt.Sprintf("version %d, this sessiond writes %d", version, store.SchemaVersion)}
	if version > store.SchemaVersion {
		schema.Problems = append(schema.Problems, DoctorProblem{
			What: fmt.Sprintf("store schema %d is newer than this sessiond (%d)", version, store.SchemaVersion),
			Fix:  "run the newer sessiond that wrote it (this one refuses to serve it)"})
	}
	rep.add(schema)
	rep.add(doctorLeases(db))
	rep.add(doctorRuntimes(st))
	rep.add(doctorOpenTurns(db))
	var lost map[string]uint64
	db.View(func(tx *bolt.Tx) error { lost = journal.Losses(tx); return nil })
	rep.add(doctorLosses(lost))
	rep.add(doctorDamaged(st))
	rep.add(doctorTagged(stateID, func(proc.Tagged) bool { return false },
		func(t proc.Tagged) string {
			return fmt.Sprintf("kill %d   # or start `%s`: it reaps", t.PID, selfServe())
		}))
}

// notWritable is a problem when serve could not write the state dir or its
// store (a read-only mount, a changed owner or mode): the daemon would
// refuse to start although the store itself is sound.
func notWritable(paths ...string) *DoctorProblem {
	for _, p := range paths {
		if err := unix.Access(p, unix.W_OK); err != nil {
			return &DoctorProblem{
				What: fmt.Sprintf("%s is not writable (%v): sessiond serve cannot open the store", tty.Safe(p), err),
				Fix:  "make it writable (remount read-write, fix its owner or mode) or pass another --state-dir"}
		}
	}
	return nil
}

// doctorLeases: with no daemon, every live or reserved lease is left over.
func doctorLeases(db *bolt.DB) DoctorCheck {
	c := DoctorCheck{Name: "leases"}
	recs, err := lease.New(db, nil, time.Now).List(func(id string, err error) {
		c.Problems = append(c.Problems, DoctorProblem{
			What: fmt.Sprintf("session %s: its lease does not decode (damaged on disk); the session cannot be held", id),
			Fix:  selfCtl() + " delete " + id + "   # or restore sessiond.db from a backup"})
	})
	if err != nil {
		c.Unknown, c.Detail = true, "read leases: "+err.Error()
		return c
	}
	for id, r := range recs {
		if r.Status == lease.Released {
			continue
		}
		what := fmt.Sprintf("session %s: lease %s at fence %d with no daemon", id, r.Status, r.Fence)
		if o := r.Owner; o != nil && o.PID > 0 {
			st := proc.Probe(proc.Identity{PID: o.PID, StartTicks: o.StartTicks, BootID: o.BootID})
			what += fmt.Sprintf("; owner pid %d is %s", o.PID, st)
		}
		c.Problems = append(c.Problems, DoctorProblem{What: what, Fix: fixServe()})
	}
	c.Detail = fmt.Sprintf("%d leases, %d left over or damaged", len(recs), len(c.Problems))
	return c
}

// doctorOpenTurns finds journals whose last turn event is a turn.started:
// with no daemon, no child runs, so the turn is stuck "working".
func doctorOpenTurns(db *bolt.DB) DoctorCheck {
	c := DoctorCheck{Name: "open-turns"}
	var open []journal.OpenTurn
	var n int
	err := db.View(func(tx *bolt.Tx) error { open, n = journal.OpenTurns(tx); return nil })
	for _, o := range open {
		c.Problems = append(c.Problems, DoctorProblem{
			What: fmt.Sprintf("session %s: turn %s open (seq %d) and no provider child", o.SessionID, o.TurnID, o.Seq),
			Fix:  fixServe()})
	}
	if err != nil {
		c.Unknown, c.Detail = true, "read journals: "+err.Error()
		return c
	}
	c.Detail = fmt.Sprintf("%d journals", n)
	return c
}
