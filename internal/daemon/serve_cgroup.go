package daemon

import (
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/proc"
)

// openCgroups picks the supervision mode (docs/operations.md "Process
// supervision"): cgroup mode under cgroup_root or the daemon's own cgroup
// when writable, else fallback, logged with the reason either way.
func (d *daemon) openCgroups(stateID string) (*proc.Cgroups, api.Supervision) {
	o := proc.CgroupOptions{Root: d.cfg.CgroupRoot, StateID: stateID,
		Limits: proc.Limits{Memory: d.cfg.Limits.Memory, Pids: d.cfg.Limits.Pids}}
	if d.handoff != nil {
		o.Kept, o.KeptInotify = d.handoff.CgroupBase, d.handoff.InotifyFD
		d.handoff.InotifyFD = 0 // OpenCgroups owns it now
	}
	g, st := proc.OpenCgroups(o, d.log)
	if g != nil {
		d.log.Info("supervision: cgroup mode", "cgroup", st.Dir, "reason", st.Reason, "controllers", st.Controllers,
			"cgroup_kill", st.Kill, "memory_max", st.Memory, "pids_max", st.Pids)
	} else {
		d.log.Warn("supervision: fallback mode (tags, group, recorded descendants)", "reason", st.Reason)
	}
	for _, n := range st.Notes {
		d.log.Warn("limit not enforced", "note", n)
	}
	return g, api.Supervision{Mode: st.Mode, Reason: st.Reason, Cgroup: st.Dir, Controllers: st.Controllers,
		CgroupKill: st.Kill, MemoryMax: st.Memory, PidsMax: st.Pids, Notes: st.Notes}
}

// recordEvery is how often, without a subreaper (macOS), one pass over the
// process table records each running child's descendants (proc.RecordDescendants).
const recordEvery = 2 * time.Second
