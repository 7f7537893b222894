package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openTestCgroups opens cgroup mode for this test under the test process's
// own cgroup. It fails (never skips) when cgroup v2 is not writable here,
// with the reason; everything it creates is removed at the end.
func openTestCgroups(t *testing.T, l Limits) *Cgroups {
	t.Helper()
	g, st := OpenCgroups(CgroupOptions{StateID: testTags(t).SessionID, Limits: l}, nil)
	if g == nil {
		t.Fatalf("cgroup mode unavailable: %s", st.Reason)
	}
	t.Cleanup(func() {
		if n, _, err := g.ReapStale(context.Background(), 20*time.Second); n > 0 || err != nil {
			t.Errorf("session cgroups left behind: %d (%v)", n, err)
		}
		g.Close()
		if _, err := os.Stat(g.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left behind (%v)", g.Dir(), err)
			removeTree(g.Dir())
		}
	})
	return g
}

// A descendant that escapes the inferred tree (an intermediate that exits,
// setsid, scrubbed env, stdio on /dev/null, SIGTERM ignored) is still a
// member of the session's cgroup: the ladder's last rung (cgroup.kill)
// kills it and the verdict's tree is proven by populated 0.
func TestCgroupStopKillsEscapedDescendant(t *testing.T) {
	g := openTestCgroups(t, Limits{})
	h := spawnHelperIn(t, "escape", g)
	if h.grand.PID == 0 {
		t.Fatal("no escaped descendant")
	}
	if !inCgroup(h.grand.PID, h.cg.rel) {
		t.Fatalf("escaped descendant %d is not in the session's cgroup %s", h.grand.PID, h.cg.rel)
	}
	dir := h.Cgroup()
	v := h.Stop(context.Background(), Ladder{Grace: 50 * time.Millisecond, TermTimeout: 200 * time.Millisecond, KillTimeout: 20 * time.Second})
	if v.Root != Exited || v.Tree != Exited {
		t.Fatalf("verdict root %s tree %s (survivors %v), want exited/exited", v.Root, v.Tree, v.Survivors)
	}
	if st := Probe(h.grand); st == Alive {
		t.Fatalf("escaped descendant %d alive after a verdict of tree exited", h.grand.PID)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("session cgroup %s not removed: %v", dir, err)
	}
}

// A child that exits on stdin EOF with nothing left gets no signal, and its
// empty cgroup is removed.
func TestCgroupStopCooperative(t *testing.T) {
	g := openTestCgroups(t, Limits{})
	h := spawnHelperIn(t, "cooperative", g)
	v := h.Stop(context.Background(), Ladder{Grace: 20 * time.Second, TermTimeout: time.Second, KillTimeout: time.Second})
	if v.Root != Exited || v.Tree != Exited || v.Signalled {
		t.Fatalf("verdict %+v, want exited/exited with no signal", v)
	}
	if _, err := os.Stat(h.Cgroup()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("session cgroup not removed: %v", err)
	}
}

// The startup reap of a crashed run: every session cgroup left under
// sessiond-<stateId> is killed whole and removed.
func TestCgroupReapStale(t *testing.T) {
	g := openTestCgroups(t, Limits{})
	h := spawnHelperIn(t, "escape", g)
	dir := h.Cgroup()
	// The next run opens the same directory: the child is not its own.
	next, st := OpenCgroups(CgroupOptions{StateID: strings.TrimPrefix(filepath.Base(g.Dir()), "sessiond-")}, nil)
	if next == nil {
		t.Fatalf("cgroup mode unavailable: %s", st.Reason)
	}
	defer next.Close()
	n, _, err := next.ReapStale(context.Background(), 20*time.Second)
	if err != nil || n != 1 {
		t.Fatalf("ReapStale = %d, %v; want 1, nil", n, err)
	}
	<-h.Exited()
	if st := Probe(h.grand); st == Alive {
		t.Fatalf("escaped descendant %d survived the reap", h.grand.PID)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale cgroup %s not removed: %v", dir, err)
	}
	h.cg.remove() // its watches; the directory is gone
}

// A configured root that is not a cgroup2 directory selects fallback and
// says why; nothing is created.
func TestCgroupFallbackReason(t *testing.T) {
	dir := t.TempDir()
	g, st := OpenCgroups(CgroupOptions{Root: dir, StateID: "x", Limits: Limits{Pids: 32}}, nil)
	if g != nil || st.Mode != ModeFallback {
		t.Fatalf("mode %s, want fallback", st.Mode)
	}
	if st.Reason == "" || len(st.Notes) != 1 {
		t.Fatalf("status %+v: want a reason and a note on the unenforced pids limit", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "sessiond-x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("fallback created %s", filepath.Join(dir, "sessiond-x"))
	}
}

// A configured root that is a file on the cgroup2 file system (an
// interface file) is "not a directory", not "not writable".
func TestCgroupRootNotADirectory(t *testing.T) {
	mounts, err := cgroup2Mounts()
	if err != nil || len(mounts) == 0 {
		t.Fatalf("no cgroup2 mount: %v", err)
	}
	file := filepath.Join(mounts[0].point, "cgroup.procs")
	g, st := OpenCgroups(CgroupOptions{Root: file, StateID: "x"}, nil)
	if g != nil || st.Mode != ModeFallback {
		t.Fatalf("mode %s, want fallback", st.Mode)
	}
	if want := "cgroup_root " + file + " is not a directory"; st.Reason != want {
		t.Fatalf("reason %q, want %q", st.Reason, want)
	}
}
