package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/sessiond/sessiond/internal/api"
)

// treeUsage is a live session's memory and process count: from its cgroup
// in cgroup mode (memory.current where the memory controller is on, else
// the members' RSS; the members of cgroup.procs), else from /proc (the
// root and its descendants).
type treeUsage struct {
	Memory uint64 `json:"memoryBytes"`
	Procs  int    `json:"processes"`
	Source string `json:"source"` // cgroup | proc
}

func sessionUsage(s api.SessionInfo) (treeUsage, bool) {
	if s.PID == 0 {
		return treeUsage{}, false
	}
	if s.Cgroup != "" {
		if pids, ok := cgroupMembers(s.Cgroup); ok {
			u := treeUsage{Procs: len(pids), Source: "cgroup"}
			if b, err := os.ReadFile(filepath.Join(s.Cgroup, "memory.current")); err == nil {
				u.Memory, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			} else {
				u.Memory = rssSum(pids)
			}
			return u, true
		}
	}
	pids := append([]int{s.PID}, descendants(s.PID)...)
	return treeUsage{Procs: len(pids), Memory: rssSum(pids), Source: "proc"}, true
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

func rssSum(pids []int) uint64 {
	var n uint64
	for _, pid := range pids {
		if p, err := process.NewProcess(int32(pid)); err == nil {
			if m, err := p.MemoryInfo(); err == nil {
				n += m.RSS
			}
		}
	}
	return n
}

// descendants lists pid's live descendants from one pass over /proc.
func descendants(pid int) []int {
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
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range kids[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
		queue = queue[1:]
	}
	return out
}
