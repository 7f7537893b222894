package proc

import "strings"

// Modes of process supervision (CgroupStatus.Mode).
const (
	// ModeCgroup: each session's processes live in a cgroup v2 of their
	// own; the cgroup's members are the tree, populated 0 proves it gone,
	// cgroup.kill is the last rung.
	ModeCgroup = "cgroup"
	// ModeFallback: no writable cgroup v2; the tree is tags ∪ group ∪
	// recorded descendants (the subreaper keeps detached ones visible).
	ModeFallback = "fallback"
)

// Limit codes, journaled in provider.notice and provider.exited.
const (
	LimitMemory = "memory_limit"
	LimitPids   = "pids_limit"
)

// Limits are per-session caps written into each session's cgroup where
// the controller is available; 0 means none.
type Limits struct {
	Memory int64 // bytes: memory.max (memory.high at 90%)
	Pids   int64 // pids.max
}

// CgroupOptions configure OpenCgroups.
type CgroupOptions struct {
	Root    string // a configured cgroup v2 directory; "" uses the daemon's own cgroup
	StateID string // names our directory sessiond-<StateID>
	Limits  Limits
	// Kept is the directory the image before a live upgrade chose
	// (Cgroups.Base): used as is, so the adopted children's cgroups are
	// found where they are (the daemon may have moved itself into a leaf
	// since, which would change "its own cgroup").
	Kept string
	// KeptInotify (> 0) is the inotify instance of the image before a
	// live upgrade, inherited through the exec: it is reused, so its
	// watches carry over (each adopted session's add finds its own watch
	// again) and the exec does not wait for the kernel to tear the
	// instance down (closing one with watches waits out an SRCU grace
	// period: 15 ms for 100 sessions here). OpenCgroups owns it: it is
	// closed, off the caller's path, when cgroup mode cannot be had.
	KeptInotify int
}

// CgroupStatus says which mode is active and why; daemon.status and
// `ctl doctor` show it.
type CgroupStatus struct {
	Mode        string   `json:"mode"`
	Reason      string   `json:"reason,omitempty"` // why fallback, or how the root was chosen
	Dir         string   `json:"dir,omitempty"`    // sessiond-<stateId> in cgroup mode
	Controllers []string `json:"controllers"`      // enabled for the sessions' cgroups
	Kill        bool     `json:"kill"`             // cgroup.kill exists (Linux ≥ 5.14)
	Memory      int64    `json:"memoryMax,omitempty"`
	Pids        int64    `json:"pidsMax,omitempty"`
	Notes       []string `json:"notes,omitempty"` // limits configured but not enforced, and why
}

// Usage is a session's resource use as its cgroup counts it.
type Usage struct {
	MemoryBytes int64 // memory.current; -1 when unknown
	Procs       int   // members of cgroup.procs; -1 when unknown
}

// cgroupName is a child's cgroup directory name: its owner (the session
// id, or a shared runtime's id) and the fence, so a re-held session never
// shares a cgroup with its previous child. A runtime's fence is 0: its id
// is new for every process.
func cgroupName(t Tags) string {
	return t.Owner() + ".f" + uitoa(t.Fence)
}

// sessionOfCgroup is the owner id in a cgroupName ("" if it is not one).
func sessionOfCgroup(name string) string {
	i := strings.LastIndex(name, ".f")
	if i <= 0 {
		return ""
	}
	return name[:i]
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
