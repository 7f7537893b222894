package proc

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRecorderFindsReparentedDescendant: a descendant that detaches
// (setsid, scrubbed env) and whose parent then exits is nobody's
// descendant any more — what a daemon without a subreaper (macOS) sees.
// Recorded while it was under the child, it is still a known member of
// the close ladder, and killed.
func TestRecorderFindsReparentedDescendant(t *testing.T) {
	stop := RecordDescendants(10 * time.Millisecond)
	defer stop()
	h := spawnHelper(t, "escape-held")
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(h.Recorded(), h.grand) { // the sampler's state; it has no signal of its own
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %v never recorded (recorded %v)", h.grand, h.Recorded())
		}
		time.Sleep(5 * time.Millisecond)
	}
	io.WriteString(h.Stdin(), "go\n")
	if line, err := h.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "released" {
		t.Fatalf("intermediate not released: %q %v", line, err)
	}
	v := h.Stop(context.Background(), Ladder{Grace: time.Second, TermTimeout: 300 * time.Millisecond, KillTimeout: 10 * time.Second})
	if st := Probe(h.grand); st == Alive {
		t.Fatalf("reparented descendant %d survived the close (verdict %+v)", h.grand.PID, v)
	}
	if v.Tree != Exited {
		t.Fatalf("verdict %+v, want tree exited", v)
	}
}
