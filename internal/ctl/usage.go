package ctl

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/proc"
)

// treeUsage is a live session's whole process tree, as the daemon
// supervises it: in cgroup mode the members of its cgroup (and the cgroups
// below), else the provider child, its descendants and every process
// tagged with the session (SESSIOND_SESSION_ID under this daemon's state
// id: a child that left the tree by a double fork or setsid). RSS and CPU
// are summed over those processes (gopsutil), PSS too (/proc/PID/smaps_rollup:
// each shared page divided between the processes mapping it, so the PSS
// of several sessions adds up where their RSS counts shared pages once per
// process); Memory is the cgroup's memory.current where the memory
// controller is on, else the RSS sum.
type treeUsage struct {
	Memory uint64 `json:"memoryBytes"`
	Procs  int    `json:"processes"`
	Source string `json:"source"` // cgroup | proc
	RSS    uint64 `json:"rssBytes"`
	PSS    uint64 `json:"pssBytes"`
	// pssOK: the PSS of at least one member could be read (not on macOS,
	// nor for another user's processes).
	pssOK bool
	// cpu is each member's user+system seconds, by pid: a frame's CPU%
	// is the growth of each member that was there the frame before, plus
	// all of each new one's.
	cpu map[int]float64
}

// procSnapshot is one pass over the process table, shared by every
// session of a frame: each process's children, and the tagged processes
// of each session and each shared runtime.
type procSnapshot struct {
	kids   map[int][]int
	tagged map[string][]int // by session id, or runtime id for a runtime's tree
}

// takeProcSnapshot reads /proc once (and the env tags of this daemon's
// processes when stateID is known). Where /proc cannot be read (macOS),
// a tree is its root alone.
func takeProcSnapshot(stateID string) procSnapshot {
	ps := procSnapshot{kids: childrenMap(), tagged: map[string][]int{}}
	if stateID != "" {
		if tagged, err := proc.ScanTagged(stateID); err == nil {
			for _, t := range tagged {
				owner := t.Tags(stateID).Owner()
				ps.tagged[owner] = append(ps.tagged[owner], t.PID)
			}
		}
	}
	return ps
}

// tree lists a live session's processes and where the list came from.
func (ps procSnapshot) tree(s api.SessionInfo) ([]int, string) {
	if s.Cgroup != "" {
		if pids, ok := cgroupMembers(s.Cgroup); ok {
			return pids, "cgroup"
		}
	}
	seen := map[int]bool{}
	var pids []int
	add := func(pid int) {
		if !seen[pid] {
			seen[pid] = true
			pids = append(pids, pid)
		}
	}
	queue := append([]int{s.PID}, ps.tagged[s.SessionID]...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		add(pid)
		queue = append(queue, ps.kids[pid]...)
	}
	return pids, "proc"
}

// runtimeUsage sums a shared runtime's tree: its cgroup (cgroup, that of
// any session on it), else its process, its descendants and the
// processes tagged with its id.
func runtimeUsage(rt api.RuntimeInfo, cgroup string, ps procSnapshot) (treeUsage, bool) {
	return sessionUsage(api.SessionInfo{SessionID: rt.RuntimeID, PID: rt.PID, Cgroup: cgroup}, ps)
}

// sessionUsage sums a live session's tree; false for a session without a
// process.
func sessionUsage(s api.SessionInfo, ps procSnapshot) (treeUsage, bool) {
	if s.PID == 0 {
		return treeUsage{}, false
	}
	pids, src := ps.tree(s)
	u := treeUsage{Source: src, cpu: map[int]float64{}}
	for _, pid := range pids {
		rss, cpu, gone := procFigures(pid)
		if gone {
			continue
		}
		u.Procs++
		u.RSS += rss
		u.cpu[pid] = cpu
		if pss, err := proc.PSS(pid); err == nil {
			u.PSS += uint64(pss)
			u.pssOK = true
		}
	}
	u.Memory = u.RSS
	if src == "cgroup" {
		if b, err := os.ReadFile(filepath.Join(s.Cgroup, "memory.current")); err == nil {
			if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
				u.Memory = n
			}
		}
	}
	return u, true
}

// procFigures is a process's RSS and CPU seconds through gopsutil; gone
// when it cannot be read (it exited between list and read).
func procFigures(pid int) (rss uint64, cpuSec float64, gone bool) {
	p, err := process.NewProcess(int32(pid))
	if err != nil {
		return 0, 0, true
	}
	mem, err := p.MemoryInfo()
	if err != nil {
		return 0, 0, true
	}
	t, err := p.Times()
	if err != nil {
		return 0, 0, true
	}
	return mem.RSS, t.User + t.System, false
}

// cpuGrowth is the CPU seconds a tree used between two samples: each
// member's growth, all of a member that is new, nothing of one that left
// (its last interval is lost: /proc keeps nothing of an exited process).
func cpuGrowth(prev, cur map[int]float64) float64 {
	var d float64
	for pid, c := range cur {
		if p, ok := prev[pid]; ok {
			d += max(c-p, 0)
		} else {
			d += c
		}
	}
	return d
}

// cgroupMembers lists the processes of a cgroup and the cgroups below it.
func cgroupMembers(dir string) ([]int, bool) {
	var pids []int
	ok := false
	filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil || !de.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		ok = true
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, ok
}

// childrenMap is every live process's children, from one pass over /proc.
func childrenMap() map[int][]int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	kids := map[int][]int{}
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		child, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "/proc/"), "/stat"))
		ppid, _ := strconv.Atoi(f[1])
		kids[ppid] = append(kids[ppid], child)
	}
	return kids
}
