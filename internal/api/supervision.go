package api

// Supervision is daemon.status's `supervision`: how the daemon knows and
// stops a session's process tree, and why.
type Supervision struct {
	// Mode is "cgroup" (each session's processes in a cgroup v2 of their
	// own) or "fallback" (tags ∪ process group ∪ recorded descendants).
	Mode string `json:"mode"`
	// Reason says why this mode: the writable cgroup directory found, or
	// what made cgroup mode unavailable.
	Reason string `json:"reason"`
	// Cgroup is the daemon's sessiond-<stateId> directory (cgroup mode).
	Cgroup string `json:"cgroup,omitempty"`
	// Controllers are the cgroup controllers enabled for the sessions.
	Controllers []string `json:"controllers"`
	// CgroupKill: the kernel has cgroup.kill (Linux ≥ 5.14), the ladder's
	// last rung; without it each member gets SIGKILL.
	CgroupKill bool `json:"cgroupKill"`
	// Limits enforced per session (absent: none).
	MemoryMax int64 `json:"memoryMax,omitempty"`
	PidsMax   int64 `json:"pidsMax,omitempty"`
	// Notes name each configured limit that is not enforced, and why.
	Notes []string `json:"notes,omitempty"`
}
