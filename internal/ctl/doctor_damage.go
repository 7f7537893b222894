package ctl

import (
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/store"
)

// CheckDamagedRows names doctorDamaged's check in the report.
const CheckDamagedRows = "damaged-rows"

// doctorDamaged reads every session record and journal row (bbolt keeps
// no checksum of values: damage inside one passes the store's checks) and
// reports those that no longer decode.
func doctorDamaged(st *store.Store) DoctorCheck {
	c := DoctorCheck{Name: CheckDamagedRows}
	var badRecords []string
	if _, err := st.ListRecords(func(id string, _ error) { badRecords = append(badRecords, id) }); err != nil {
		c.Unknown, c.Detail = true, "read records: "+err.Error()
		return c
	}
	for _, id := range badRecords {
		c.Problems = append(c.Problems, DoctorProblem{
			What: fmt.Sprintf("session %s: its record does not decode (damaged on disk); the session cannot be listed or held", id),
			Fix:  fmt.Sprintf("%s delete %s   # or restore sessiond.db from a backup", selfCtl(), id)})
	}
	var damaged map[string][]uint64
	st.DB.View(func(tx *bolt.Tx) error { damaged = journal.Damaged(tx); return nil })
	ids := make([]string, 0, len(damaged))
	for id := range damaged {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		seqs := damaged[id]
		c.Problems = append(c.Problems, DoctorProblem{
			What: fmt.Sprintf("session %s: %d journal rows do not decode (damaged on disk; read as journal.corrupt), first at seq %d", id, len(seqs), seqs[0]),
			Fix:  fmt.Sprintf("nothing restores them: read `%s attach %s`, or restore sessiond.db from a backup", selfCtl(), id)})
	}
	c.Detail = fmt.Sprintf("%d damaged records, %d sessions with damaged journal rows", len(badRecords), len(ids))
	return c
}
