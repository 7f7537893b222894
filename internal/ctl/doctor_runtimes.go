package ctl

import (
	"fmt"

	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/store"
)

// CheckRuntimeRecords names doctorRuntimes' check in the report.
const CheckRuntimeRecords = "runtime-records"

// doctorRuntimes: with no daemon, every runtime record is left over by a
// run that did not shut down (a clean shutdown deletes each once its
// runtime is proven gone). Its owner still alive is an orphan runtime;
// gone, a record the next start deletes. One that does not decode names
// its runtime: its processes are found by their tags only.
func doctorRuntimes(st *store.Store) DoctorCheck {
	c := DoctorCheck{Name: CheckRuntimeRecords}
	recs, err := st.ListRuntimes(func(id string, err error) {
		c.Problems = append(c.Problems, DoctorProblem{
			What: fmt.Sprintf("runtime %s: its record does not decode (damaged on disk): its processes are found only by their SESSIOND_RUNTIME_ID tag", id),
			Fix: fmt.Sprintf("run `%s` once with /proc readable (no hidepid, same uid as the providers): startup reaps the runtime by its tag and deletes the record; or restore sessiond.db from a backup",
				selfServe())})
	})
	if err != nil {
		c.Unknown, c.Detail = true, "read runtime records: "+err.Error()
		return c
	}
	for _, r := range recs {
		o := r.Owner
		state := proc.Probe(proc.Identity{PID: o.PID, StartTicks: o.StartTicks, BootID: o.BootID})
		p := DoctorProblem{
			What: fmt.Sprintf("runtime %s (%s/%s, %d sessions bound): recorded with no daemon; its owner pid %d is %s",
				r.ID, r.Profile, r.Account, len(r.Sessions), o.PID, state),
			Fix: fixServe()}
		if state == proc.Alive {
			p.Fix = fmt.Sprintf("kill %d   # or %s", o.PID, fixServe())
		}
		c.Problems = append(c.Problems, p)
	}
	c.Detail = fmt.Sprintf("%d runtime records, %d left over or damaged", len(recs), len(c.Problems))
	return c
}

// staleRuntimeRecord is one of daemon.stats' staleRuntimeRecords.
type staleRuntimeRecord struct {
	RuntimeID string `json:"runtimeId"`
	PID       int    `json:"pid"`
	Owner     string `json:"owner"`
	Damaged   bool   `json:"damaged"`
}

// doctorStaleRuntimes (with a daemon): the runtime records no runtime of
// the daemon is: one whose teardown could not prove its process gone
// (owner alive: an orphan), or left over (owner gone) or damaged, which
// the daemon's next start deletes.
func doctorStaleRuntimes(stale []staleRuntimeRecord) DoctorCheck {
	c := DoctorCheck{Name: CheckRuntimeRecords}
	restart := selfCtl() + " shutdown, then " + selfServe() + ": startup reaps by the record and deletes it"
	for _, r := range stale {
		switch {
		case r.Damaged:
			c.Problems = append(c.Problems, DoctorProblem{
				What: fmt.Sprintf("runtime %s: its record does not decode (damaged on disk): its processes are found only by their SESSIOND_RUNTIME_ID tag", r.RuntimeID),
				Fix:  restart + " (with /proc readable: it reaps by the tag scan), or restore sessiond.db from a backup"})
		case r.Owner == proc.Alive.String():
			c.Problems = append(c.Problems, DoctorProblem{
				What: fmt.Sprintf("runtime %s: recorded, not a runtime of the daemon, and its owner pid %d is alive", r.RuntimeID, r.PID),
				Fix:  fmt.Sprintf("kill %d   # or %s", r.PID, restart)})
		default:
			c.Problems = append(c.Problems, DoctorProblem{
				What: fmt.Sprintf("runtime %s: recorded, not a runtime of the daemon; its owner pid %d is %s", r.RuntimeID, r.PID, r.Owner),
				Fix:  restart})
		}
	}
	c.Detail = fmt.Sprintf("%d runtime records of no live runtime", len(stale))
	return c
}
