package daemontest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// noteCgroup remembers the daemon's cgroup directory from its
// "supervision: cgroup mode" line.
func (d *Daemon) noteCgroup(line []byte) {
	if !bytes.Contains(line, []byte(`"supervision: cgroup mode"`)) {
		return
	}
	var rec struct {
		Cgroup string `json:"cgroup"`
	}
	if json.Unmarshal(line, &rec) == nil && rec.Cgroup != "" {
		d.cgroup.Store(&rec.Cgroup)
	}
}

// Cgroup is the daemon's sessiond-<stateId> directory ("" in fallback mode).
func (d *Daemon) Cgroup() string {
	if p := d.cgroup.Load(); p != nil {
		return *p
	}
	return ""
}

// removeCgroups empties and removes what a daemon killed mid-run left in
// its cgroup directory (a clean shutdown leaves nothing): cgroup.kill on
// each session cgroup, a wait for populated 0, rmdir deepest first.
func (d *Daemon) removeCgroups() {
	dir := d.Cgroup()
	if dir == "" {
		return
	}
	if _, err := os.Stat(dir); err != nil {
		return
	}
	var dirs []string
	filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err == nil && de.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, p := range dirs {
		os.WriteFile(filepath.Join(p, "cgroup.kill"), []byte("1"), 0)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range dirs {
		for populated(p) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // test harness only: no watcher here
		}
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			d.t.Errorf("daemontest: cgroup %s not removed: %v", p, err)
		}
	}
	d.t.Logf("daemontest: removed cgroups left by the daemon in %s", dir)
}

func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	return err == nil && strings.Contains(string(b), "populated 1")
}

// CgroupMembers lists the pids in every session cgroup under a daemon's
// cgroup directory, and the session cgroups themselves.
func CgroupMembers(dir string) (pids []int, cgroups []string) {
	if dir == "" {
		return nil, nil
	}
	filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil || !de.IsDir() || p == dir {
			return nil
		}
		cgroups = append(cgroups, p)
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, cgroups
}

// Running reports whether pid exists and is not a zombie.
func Running(pid int) bool { return !isZombie(pid) }
