package main

import (
	"strings"
	"testing"
)

// TestScheduleComparesEveryGroup: with --compare every selected group runs
// A B A B against the two binaries given, the second group as the first
// (it once took its A from the binary the first group ended with).
func TestScheduleComparesEveryGroup(t *testing.T) {
	var got []string
	for _, st := range schedule("rpc,replay", "/bin/A", "/bin/B") {
		got = append(got, st.group.name+st.side.suffix+"="+st.side.bin)
	}
	want := "rpc@a=/bin/A rpc@b=/bin/B rpc@a=/bin/A rpc@b=/bin/B " +
		"replay@a=/bin/A replay@b=/bin/B replay@a=/bin/A replay@b=/bin/B"
	if strings.Join(got, " ") != want {
		t.Fatalf("schedule:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if n := len(schedule("", "/bin/A", "")); n != len(groups) {
		t.Fatalf("without --compare: %d runs, want one per group (%d)", n, len(groups))
	}
}
