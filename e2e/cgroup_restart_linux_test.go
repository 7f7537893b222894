package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ECgroupRestartReapsStray: a descendant that moved itself, env
// scrubbed, into the daemon's own sessiond-<stateId> is no member of any
// session cgroup; after a kill -9 of the daemon the next start still kills
// it before it listens (no process belongs in sessiond-<stateId> itself).
func TestE2ECgroupRestartReapsStray(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	requireCgroupMode(t, d)
	s := openCgSession(t, d, "echo")
	pid := pidAfter(t, s.turn(t, "/cgmove parent"), "escaped=")
	killAfter(t, pid)
	d.Kill()
	if !running(pid) {
		t.Fatalf("the stray %d died with the daemon: the test proves nothing", pid)
	}
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	requireCgroupMode(t, d2)
	if running(pid) {
		t.Fatalf("the stray %d in sessiond-<stateId> still runs once the restarted daemon listens", pid)
	}
}

// freezeV1 freezes pid through the cgroup v1 freezer (a hybrid host's):
// SIGKILL cannot act on it until it is thawed. The test's cleanup thaws
// and kills it and removes the freezer cgroup; so does the returned func,
// to be called before a daemon's own cleanup checks its cgroups.
func freezeV1(t *testing.T, pid int) (thawKill func()) {
	t.Helper()
	fz := filepath.Join("/sys/fs/cgroup/freezer", fmt.Sprintf("sessiond-test-%d", os.Getpid()))
	if err := os.Mkdir(fz, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatalf("this test needs the cgroup v1 freezer: %v", err)
	}
	var once sync.Once
	thawKill = func() {
		once.Do(func() {
			os.WriteFile(filepath.Join(fz, "freezer.state"), []byte("THAWED"), 0)
			syscall.Kill(pid, syscall.SIGKILL)
			deadline := time.Now().Add(20 * time.Second)
			for os.Remove(fz) != nil && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // the killed task leaves the freezer cgroup
			}
			for running(pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // reaped by its parent (the subreaper)
			}
		})
	}
	t.Cleanup(thawKill)
	if err := os.WriteFile(filepath.Join(fz, "tasks"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fz, "freezer.state"), []byte("FROZEN"), 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(fz, "freezer.state"))
		if strings.TrimSpace(string(b)) == "FROZEN" {
			return thawKill
		}
		if time.Now().After(deadline) {
			t.Fatalf("freezer state %q", b)
		}
		time.Sleep(10 * time.Millisecond) // the kernel reports FREEZING until every task is frozen
	}
}

// memberNamed waits for a process named comm in cgroup dir.
func memberNamed(t *testing.T, dir, comm string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(b)) == comm {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond) // the provider's shell forks it before it execs
	}
	t.Fatalf("no %s in %s", comm, dir)
	return 0
}

// TestE2ECgroupRestartFrozenOnce: a descendant of a crashed run that no
// signal can stop (frozen) is laddered at most once by the next start:
// the stale-cgroup reap proves it unkillable, the orphan reap and its
// rescans never ladder it again, and the bounded cleanup takes it.
func TestE2ECgroupRestartFrozenOnce(t *testing.T) {
	bin := daemontest.Binary(t)
	cfg := fmt.Sprintf(`[ladder]
grace = "100ms"
term_timeout = "300ms"
kill_timeout = "500ms"
[providers.fz]
command = ["/bin/sh", "-c", "setsid sh -c 'exec sleep 3607' </dev/null >/dev/null 2>&1 & exec %s provider echo"]
`, bin)
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	requireCgroupMode(t, d)
	s := openCgSession(t, d, "fz")
	sp := memberNamed(t, s.info(t).Cgroup, "sleep")
	thawKill := freezeV1(t, sp)
	d.Kill()
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir, Config: cfg})
	requireCgroupMode(t, d2)
	if !running(sp) {
		t.Fatalf("the frozen %d did not survive: the test proves nothing", sp)
	}
	if n := strings.Count(d2.Log.String(), fmt.Sprintf(`"pid":%d,"signal":"SIGTERM"`, sp)); n > 0 {
		t.Fatalf("the frozen %d, proven unkillable by the stale-cgroup reap, was laddered %d more times:\n%s", sp, n, d2.Log.String())
	}
	waitLog(t, d2, "bounded cleanup takes them")
	thawKill()
	d2.Stop()
}

// TestE2ECgroupEscapeUnkillable: a tagged descendant that moved to the
// root cgroup and cannot be killed (frozen) makes the verdict truthful:
// provider.exited says tree live, not exited.
func TestE2ECgroupEscapeUnkillable(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "[ladder]\ngrace = \"100ms\"\nterm_timeout = \"300ms\"\nkill_timeout = \"500ms\"\n"})
	requireCgroupMode(t, d)
	s := openCgSession(t, d, "echo")
	pid := pidAfter(t, s.turn(t, "/cgmove root"), "escaped=")
	killAfter(t, pid)
	thawKill := freezeV1(t, pid)
	ex := s.closeExited(t)
	if ex.Tree != "live" {
		t.Fatalf("provider.exited %+v with the frozen escapee %d alive: want tree live", ex, pid)
	}
	thawKill()
	d.Stop()
}
