package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/ctl"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// waitNotice waits for provider.notice {code} among everything the
// recorder has seen (it may have come before the turn ended).
func waitNotice(t *testing.T, r *recorder, code string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		for _, ev := range r.evs {
			var n event.NoticeData
			if ev.Type == event.ProviderNotice && json.Unmarshal(ev.Data, &n) == nil && n.Code == code {
				r.mu.Unlock()
				return
			}
		}
		r.mu.Unlock()
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("no provider.notice %s", code)
		}
	}
}

// cgroupProcs lists the pids in a cgroup directory.
func cgroupProcs(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		out = append(out, pid)
	}
	return out
}

func noteOn(notes []string, controller string) string {
	for _, n := range notes {
		if strings.HasPrefix(n, controller+":") {
			return n
		}
	}
	return ""
}

// TestE2ECgroupForkbomb: a fork bomb inside one session's provider. With
// the pids controller (pids = 32) it is contained: forks past 32 are
// refused and journaled as provider.notice pids_limit. Where the kernel
// has the controller on a cgroup v1 hierarchy (this machine), the status
// says the limit is not enforced and why, and the bomb is still held
// whole by the cgroup. Either way the other session and the daemon are
// unaffected, and close leaves no process of the bomb.
func TestE2ECgroupForkbomb(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "[limits]\npids = 32\n"})
	sup := requireCgroupMode(t, d)
	a := openCgSession(t, d, "echo")
	b := openCgSession(t, d, "echo")
	a.turn(t, "/forkbomb 64")
	dir := a.info(t).Cgroup
	if sup.PidsMax == 32 {
		waitNotice(t, a.rec, "pids_limit")
		if n := len(cgroupProcs(t, dir)); n > 32 {
			t.Fatalf("%d processes in a cgroup limited to 32", n)
		}
	} else {
		note := noteOn(sup.Notes, "pids")
		if note == "" {
			t.Fatalf("pids limit configured, not enforced, and no note says why: %+v", sup)
		}
		t.Logf("pids controller unavailable here: %s", note)
		// echo + shell + 64 sleeps, all in the session's cgroup
		for deadline := time.Now().Add(30 * time.Second); len(cgroupProcs(t, dir)) < 66; {
			if time.Now().After(deadline) {
				t.Fatalf("the bomb did not reach 66 processes: %d", len(cgroupProcs(t, dir)))
			}
			time.Sleep(10 * time.Millisecond) // another process's forks: no signal to wait on
		}
	}
	bomb := cgroupProcs(t, dir)
	if got := b.turn(t, "hi"); got != "echo: hi" {
		t.Fatalf("the other session answered %q", got)
	}
	if st := d.Status(t); st.Sessions.Live != 2 {
		t.Fatalf("live sessions %d, want 2", st.Sessions.Live)
	}
	if ex := a.closeExited(t); ex.Tree != "exited" {
		t.Fatalf("provider.exited %+v, want tree exited", ex)
	}
	for _, pid := range bomb {
		if running(pid) && strings.HasSuffix(dir, cgroupOf(pid)) {
			t.Fatalf("pid %d of the bomb still runs", pid)
		}
	}
	if !gone(dir) {
		t.Fatalf("cgroup %s not removed", dir)
	}
	if si := b.info(t); si.State != "live" {
		t.Fatalf("the other session is %s", si.State)
	}
}

// TestE2ECgroupMemoryLimit: with the memory controller, a process past
// memory.max is OOM-killed and journaled as provider.notice memory_limit;
// without it (this machine: memory is on a cgroup v1 hierarchy) the status
// names the limit as not enforced and why.
func TestE2ECgroupMemoryLimit(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "[limits]\nmemory = \"64MiB\"\n"})
	sup := requireCgroupMode(t, d)
	if sup.MemoryMax == 0 {
		note := noteOn(sup.Notes, "memory")
		if note == "" {
			t.Fatalf("memory limit configured, not enforced, and no note says why: %+v", sup)
		}
		t.Logf("memory controller unavailable here: %s", note)
		code, rep, _ := doctorJSON(t, d.Socket)
		if code != 0 || !strings.Contains(checkDetail(rep, "supervision"), "memory: controller not available") {
			t.Fatalf("doctor (exit %d) does not report the unenforced limit: %+v", code, rep)
		}
		return
	}
	a := openCgSession(t, d, "echo")
	a.turn(t, "/hog 256")
	waitNotice(t, a.rec, "memory_limit")
	if ex := a.closeExited(t); ex.Tree != "exited" {
		t.Fatalf("provider.exited %+v", ex)
	}
}

func checkDetail(rep ctl.DoctorReport, name string) string {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c.Detail
		}
	}
	return ""
}

// ownCgroupDir is this test process's cgroup v2 directory.
func ownCgroupDir(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	self := cgroupOf(os.Getpid())
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) >= 5 && f[3] == "/" {
			return filepath.Join(f[4], self)
		}
	}
	t.Fatal("no cgroup2 mount: cgroup v2 is required here")
	return ""
}

// TestE2ECgroupFallbackReadOnly: a cgroup_root the daemon cannot write (a
// read-only bind mount of a cgroup directory) selects fallback mode;
// daemon.status and ctl doctor say so and why, limits are reported as not
// enforced, and sessions work on the inferred tree.
func TestE2ECgroupFallbackReadOnly(t *testing.T) {
	src := filepath.Join(ownCgroupDir(t), fmt.Sprintf("sessiond-e2e-ro-%d", os.Getpid()))
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatalf("cgroup v2 is not writable here: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(src); err != nil {
			t.Errorf("remove %s: %v", src, err)
		}
	})
	mnt := t.TempDir()
	for _, args := range [][]string{{"--bind", src, mnt}, {"-o", "remount,bind,ro", mnt}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	d := daemontest.Start(t, daemontest.Options{Config: fmt.Sprintf("cgroup_root = %q\n[limits]\npids = 32\n", mnt)})
	sup := d.Status(t).Supervision
	if sup.Mode != "fallback" || !strings.Contains(sup.Reason, "read-only file system") || !strings.Contains(sup.Reason, "cgroup_root") {
		t.Fatalf("supervision %+v, want fallback naming the read-only cgroup_root", sup)
	}
	if noteOn(sup.Notes, "pids") == "" {
		t.Fatalf("no note on the unenforced pids limit: %+v", sup)
	}
	code, rep, _ := doctorJSON(t, d.Socket)
	if det := checkDetail(rep, "supervision"); code != 0 || !strings.HasPrefix(det, "fallback mode: ") {
		t.Fatalf("doctor exit %d, supervision %q", code, det)
	}
	a := openCgSession(t, d, "echo")
	if got := a.turn(t, "hi"); got != "echo: hi" {
		t.Fatalf("answer %q", got)
	}
	if si := a.info(t); si.Cgroup != "" {
		t.Fatalf("fallback session has a cgroup %q", si.Cgroup)
	}
	if ex := a.closeExited(t); ex.Tree != "exited" {
		t.Fatalf("provider.exited %+v", ex)
	}
}
