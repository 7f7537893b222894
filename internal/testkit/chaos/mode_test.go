package chaos

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// chaosSetup is the daemon's config for -mode: cgroup mode as the daemon
// finds it (its own cgroup), with /escape added to the workload (a
// descendant only a cgroup still knows); fallback forced by a cgroup_root
// that is no cgroup2 directory.
func chaosSetup(t *testing.T) string {
	switch *mode {
	case "cgroup":
		if !slices.Contains(texts, "/escape") {
			texts = append(texts, "/escape", "/escape /sleep 400")
		}
		return chaosConfig
	case "fallback":
		return fmt.Sprintf("cgroup_root = %q\n", t.TempDir()) + chaosConfig
	}
	t.Fatalf("-mode %q: want cgroup or fallback", *mode)
	return ""
}

// requireMode fails (never skips) unless the daemon runs in -mode.
func requireMode(t *testing.T, d *daemontest.Daemon) {
	t.Helper()
	if s := d.Status(t).Supervision; s.Mode != *mode {
		t.Fatalf("the daemon runs in %s mode (%s); -mode=%s is required", s.Mode, s.Reason, *mode)
	}
}

// leftBehind is every process a killed daemon left: tagged ones, and in
// cgroup mode the members of its session cgroups (escaped ones included).
func leftBehind(d *daemontest.Daemon) []int {
	pids := daemontest.TaggedProcesses(d.StateID)
	members, _ := daemontest.CgroupMembers(d.Cgroup())
	for _, p := range members {
		if !slices.Contains(pids, p) {
			pids = append(pids, p)
		}
	}
	return pids
}

// checkReaped: once the restarted daemon listens, nothing the crashed run
// left runs, and no session cgroup of it is left.
func checkReaped(d *daemontest.Daemon, left []int) []string {
	var vs []string
	for _, pid := range left {
		if daemontest.Running(pid) {
			vs = append(vs, fmt.Sprintf("pid %d of the killed daemon still runs after the restart", pid))
		}
	}
	if _, cgs := daemontest.CgroupMembers(d.Cgroup()); len(cgs) > 0 {
		vs = append(vs, fmt.Sprintf("session cgroups of the killed daemon left after the restart: %v", cgs))
	}
	return vs
}

// checkNoCgroups: after every session was closed no session cgroup is
// left (a tree not proven gone goes to the bounded cleanup: wait briefly).
func checkNoCgroups(d *daemontest.Daemon) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, cgs := daemontest.CgroupMembers(d.Cgroup())
		if len(cgs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return []string{fmt.Sprintf("session cgroups left after closing every session: %v (members %v)", cgs, pids)}
		}
		time.Sleep(20 * time.Millisecond) // no signal for another process's rmdir
	}
}
