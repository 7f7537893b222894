package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// killAfter makes sure pid (a descendant the test made leave its cgroup)
// does not outlive the test, whatever the daemon did.
func killAfter(t *testing.T, pid int) {
	t.Cleanup(func() {
		if running(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// TestE2ECgroupEscapeMoves: a descendant that moves itself out of its
// session cgroup — into the daemon's own sessiond-<stateId> with its env
// scrubbed, or into the root cgroup with its tags kept — is still stopped
// by close, and provider.exited says tree exited only because it is gone.
func TestE2ECgroupEscapeMoves(t *testing.T) {
	for _, mode := range []string{"parent", "root"} {
		t.Run(mode, func(t *testing.T) {
			d := daemontest.Start(t, daemontest.Options{Config: "[ladder]\ngrace = \"100ms\"\nterm_timeout = \"300ms\"\nkill_timeout = \"20s\"\n"})
			sup := requireCgroupMode(t, d)
			s := openCgSession(t, d, "echo")
			pid := pidAfter(t, s.turn(t, "/cgmove "+mode), "escaped=")
			killAfter(t, pid)
			si := s.info(t)
			if cg := cgroupOf(pid); cg == "" || strings.HasSuffix(si.Cgroup, cg) {
				t.Fatalf("pid %d did not leave its session cgroup %s (it is in %q)", pid, si.Cgroup, cg)
			}
			ex := s.closeExited(t)
			if running(pid) {
				t.Fatalf("descendant %d that moved to the %s cgroup still runs after close (provider.exited %+v)", pid, mode, ex)
			}
			if ex.Tree != "exited" {
				t.Fatalf("provider.exited %+v, want tree exited", ex)
			}
			d.Stop()
			if !gone(sup.Cgroup) {
				t.Fatalf("a clean shutdown left %s", sup.Cgroup)
			}
		})
	}
}

// TestE2ECgroupNestedMember: a descendant that makes a sub-cgroup of its
// session cgroup and moves there gets the ladder's SIGTERM (it exits on
// it: no cgroup.kill is needed), and close removes the session cgroup
// with its sub-cgroup.
func TestE2ECgroupNestedMember(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "[ladder]\ngrace = \"100ms\"\nterm_timeout = \"60s\"\nkill_timeout = \"20s\"\n"})
	sup := requireCgroupMode(t, d)
	s := openCgSession(t, d, "echo")
	pid := pidAfter(t, s.turn(t, "/cgmove sub"), "escaped=")
	killAfter(t, pid)
	si := s.info(t)
	if cg := cgroupOf(pid); !strings.HasSuffix(cg, "/inner") {
		t.Fatalf("pid %d is in %q, not in a sub-cgroup of %s", pid, cg, si.Cgroup)
	}
	ex := s.closeExited(t)
	if ex.Tree != "exited" || running(pid) {
		t.Fatalf("provider.exited %+v, nested pid %d running %v", ex, pid, running(pid))
	}
	if !strings.Contains(d.Log.String(), fmt.Sprintf(`"pid":%d,"signal":"SIGTERM"`, pid)) {
		t.Fatalf("the nested member %d got no SIGTERM:\n%s", pid, d.Log.String())
	}
	if !gone(si.Cgroup) {
		t.Fatalf("session cgroup %s not removed", si.Cgroup)
	}
	d.Stop()
	if !gone(sup.Cgroup) {
		t.Fatalf("a clean shutdown left %s", sup.Cgroup)
	}
}

// TestE2ECgroupBaseRemoved: sessiond-<stateId> removed while the daemon
// runs idle (rmdir succeeds on an empty cgroup): the next hold makes it
// again (logged) and runs its provider in a cgroup of its own.
func TestE2ECgroupBaseRemoved(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	sup := requireCgroupMode(t, d)
	if err := os.Remove(sup.Cgroup); err != nil {
		t.Fatal(err)
	}
	s := openCgSession(t, d, "echo")
	if got := s.turn(t, "hi"); !strings.Contains(got, "hi") {
		t.Fatalf("answer %q", got)
	}
	if si := s.info(t); !strings.HasPrefix(si.Cgroup, sup.Cgroup+"/") || gone(si.Cgroup) {
		t.Fatalf("session cgroup %q, want one under the recreated %s", si.Cgroup, sup.Cgroup)
	}
	waitLog(t, d, "cgroup directory was removed while it ran: recreated")
	if ex := s.closeExited(t); ex.Tree != "exited" {
		t.Fatalf("provider.exited %+v", ex)
	}
	d.Stop()
	if !gone(sup.Cgroup) {
		t.Fatalf("a clean shutdown left %s", sup.Cgroup)
	}
}
