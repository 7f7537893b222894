package ctl

import (
	"strings"
	"testing"
)

// TestDoctorStaleRuntimes: with a daemon, each runtime record of no live
// runtime is a problem: an owner alive gets its kill line, a gone or
// damaged one the restart that deletes it.
func TestDoctorStaleRuntimes(t *testing.T) {
	if c := doctorStaleRuntimes(nil); len(c.Problems) != 0 {
		t.Fatalf("no stale record: %+v", c)
	}
	c := doctorStaleRuntimes([]staleRuntimeRecord{
		{RuntimeID: "r_A", PID: 42, Owner: "alive"},
		{RuntimeID: "r_B", PID: 43, Owner: "exited"},
		{RuntimeID: "r_C", Damaged: true},
	})
	if len(c.Problems) != 3 {
		t.Fatalf("problems %+v", c.Problems)
	}
	for i, want := range []struct{ what, fix string }{
		{"runtime r_A: recorded, not a runtime of the daemon, and its owner pid 42 is alive", "kill 42"},
		{"runtime r_B: recorded, not a runtime of the daemon; its owner pid 43 is exited", "startup reaps by the record and deletes it"},
		{"runtime r_C: its record does not decode", "it reaps by the tag scan"},
	} {
		p := c.Problems[i]
		if !strings.Contains(p.What, want.what) || !strings.Contains(p.Fix, want.fix) {
			t.Errorf("problem %d: %+v, want %q / %q", i, p, want.what, want.fix)
		}
	}
}
