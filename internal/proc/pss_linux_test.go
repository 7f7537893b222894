package proc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// sampleRollup is the head of a real /proc/PID/smaps_rollup (Linux 6.x).
const sampleRollup = `55d0c1a6e000-7ffd6a5f9000 ---p 00000000 00:00 0                          [rollup]
Rss:                1920 kB
Pss:                 407 kB
Pss_Dirty:           124 kB
Pss_Anon:            112 kB
Pss_File:            295 kB
Pss_Shmem:             0 kB
Shared_Clean:       1540 kB
`

// PSS of this test process: read, positive, whole kB.
func TestPSSSelf(t *testing.T) {
	n, err := PSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 || n%1024 != 0 {
		t.Fatalf("PSS(self) = %d bytes", n)
	}
}

// TreePSS over a real child and its grandchild sums both; over the
// grandchild alone, one.
func TestTreePSSChild(t *testing.T) {
	h := spawnHelper(t, "orphan")
	total, procs, err := TreePSS(h.Identity().PID)
	if err != nil {
		t.Fatal(err)
	}
	if procs != 2 || total <= 0 {
		t.Fatalf("TreePSS(child %d) = %d bytes over %d processes, want 2 (child, grandchild %d)", h.Identity().PID, total, procs, h.grand.PID)
	}
	g, gp, err := TreePSS(h.grand.PID)
	if err != nil || gp != 1 || g <= 0 {
		t.Fatalf("TreePSS(grandchild) = %d, %d, %v", g, gp, err)
	}
	one, err := PSS(h.Identity().PID)
	if err != nil || one <= 0 {
		t.Fatalf("PSS(child) = %d, %v", one, err)
	}
	if v := h.Stop(context.Background(), testLadder); v.Tree != Exited || len(v.Survivors) > 0 {
		t.Fatalf("stop: %+v", v)
	}
}

// A pid that does not exist: ErrPSS, the cause, and a message naming the
// pid and the file.
func TestPSSNoProcess(t *testing.T) {
	const pid = 1 << 30 // above pid_max's ceiling (4194304)
	for name, f := range map[string]func() error{
		"PSS":     func() error { _, err := PSS(pid); return err },
		"TreePSS": func() error { _, _, err := TreePSS(pid); return err },
	} {
		err := f()
		if !errors.Is(err, ErrPSS) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", pid)) {
			t.Errorf("%s(%d): %v", name, pid, err)
		}
	}
	_, err := PSS(pid)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "smaps_rollup") {
		t.Errorf("PSS error does not name the file: %v", err)
	}
}

// Damaged smaps_rollup texts are errors that say what is wrong; the real
// layout parses.
func TestParsePSS(t *testing.T) {
	if n, err := parsePSS([]byte(sampleRollup)); err != nil || n != 407*1024 {
		t.Fatalf("sample: %d, %v", n, err)
	}
	cut := sampleRollup[:strings.Index(sampleRollup, "Pss:")+len("Pss:                 40")]
	for _, c := range []struct{ name, text, want string }{
		{"empty", "", "no memory map"},
		{"truncated before Pss", sampleRollup[:strings.Index(sampleRollup, "Pss:")], "no Pss line"},
		{"truncated in the Pss line", cut, `want "Pss: N kB"`},
		{"only the Pss_ lines", strings.Replace(sampleRollup, "Pss:                 407 kB\n", "", 1), "no Pss line"},
		{"not a number", strings.Replace(sampleRollup, " 407 kB", " 4x7 kB", 1), "invalid syntax"},
		{"other unit", strings.Replace(sampleRollup, " 407 kB", " 407 MB", 1), `want "Pss: N kB"`},
		{"negative", strings.Replace(sampleRollup, " 407 kB", " -407 kB", 1), "invalid syntax"},
		{"over uint64", strings.Replace(sampleRollup, " 407 kB", " 99999999999999999999999 kB", 1), "out of range"},
		{"bytes over int64", strings.Replace(sampleRollup, " 407 kB", " 9007199254740992 kB", 1), "over the limit of 9007199254740991 kB"},
	} {
		n, err := parsePSS([]byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %d, %v; want an error with %q", c.name, n, err, c.want)
		}
	}
	if n, err := parsePSS([]byte(strings.Replace(sampleRollup, " 407 kB", " 9007199254740991 kB", 1))); err != nil || n != 9007199254740991*1024 {
		t.Errorf("the largest Pss: %d, %v", n, err)
	}
}

// TreesMemory over two real trees in one pass: a child with its
// grandchild sums two processes, a lone child one; PSS is read (not
// left 0) and never above RSS; a root that does not exist is left out.
func TestTreesMemory(t *testing.T) {
	a, b := spawnHelper(t, "orphan"), spawnHelper(t, "sleep")
	const absent = 1 << 30
	got, err := TreesMemory([]int{a.Identity().PID, b.Identity().PID, absent})
	if err != nil {
		t.Fatal(err)
	}
	ma, mb := got[a.Identity().PID], got[b.Identity().PID]
	if ma.Procs != 2 || mb.Procs != 1 {
		t.Fatalf("procs: tree a %d (want 2), tree b %d (want 1)", ma.Procs, mb.Procs)
	}
	for name, m := range map[string]TreeMemory{"a": ma, "b": mb} {
		if m.PSS <= 0 || m.RSS <= 0 || m.PSS > m.RSS {
			t.Errorf("tree %s: rss %d pss %d", name, m.RSS, m.PSS)
		}
	}
	if _, ok := got[absent]; ok {
		t.Errorf("an absent root has figures: %+v", got[absent])
	}
	if v := a.Stop(context.Background(), testLadder); v.Tree != Exited || len(v.Survivors) > 0 {
		t.Fatalf("stop: %+v", v)
	}
}

// BenchmarkTreesMemory20 is one daemon.status's memory read with 20
// runtimes (a real process each).
func BenchmarkTreesMemory20(b *testing.B) {
	roots := make([]int, 20)
	for i := range roots {
		c := exec.Command("sleep", "600")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		roots[i] = c.Process.Pid
	}
	for b.Loop() {
		if m, err := TreesMemory(roots); err != nil || len(m) != len(roots) {
			b.Fatalf("%d trees, %v", len(m), err)
		}
	}
}
