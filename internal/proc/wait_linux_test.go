package proc

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWaitHoldsNoThreadPerChild: a running child's waiter is parked in the
// runtime's poller, not in waitid on an OS thread of its own (a live
// upgrade's exec has to stop every thread, and the new image would start
// one per adopted child before accepting). Each exit is still seen, with
// its code.
func TestWaitHoldsNoThreadPerChild(t *testing.T) {
	const n = 16
	before := threadCount(t)
	hs := make([]*helper, n)
	for i := range hs {
		hs[i] = spawnHelper(t, "cooperative")
	}
	if grew := threadCount(t) - before; grew >= n/2 {
		t.Fatalf("%d running children added %d threads (want fewer than %d: no thread parked per child)", n, grew, n/2)
	}
	for _, h := range hs {
		h.Stdin().Close()
	}
	for i, h := range hs {
		select {
		case <-h.Exited():
		case <-time.After(30 * time.Second):
			t.Fatalf("child %d (pid %d): exit not seen within 30 s", i, h.id.PID)
		}
		if e := h.Exit(); e.Code == nil || *e.Code != 0 {
			t.Errorf("child %d: exit %+v, want code 0", i, e)
		}
	}
}

func threadCount(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}
