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
