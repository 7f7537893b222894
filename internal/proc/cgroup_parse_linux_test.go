package proc

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupPathParsing(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/x\134y`: `/x\y`, `/bad\04`: `/bad\04`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tc := range []struct {
		p, prefix, rest string
		ok              bool
	}{
		{"/sys/fs/cgroup/unified/x", "/sys/fs/cgroup/unified", "x", true},
		{"/sys/fs/cgroup/unifiedx", "/sys/fs/cgroup/unified", "", false},
		{"/a", "/", "a", true},
		{"/a", "/a", "", true},
	} {
		if rest, ok := cutCgroupPrefix(tc.p, tc.prefix); rest != tc.rest || ok != tc.ok {
			t.Errorf("cutCgroupPrefix(%q, %q) = %q, %v", tc.p, tc.prefix, rest, ok)
		}
	}
	name := cgroupName(Tags{SessionID: "s_AB.f-x", Fence: 12})
	if name != "s_AB.f-x.f12" || sessionOfCgroup(name) != "s_AB.f-x" || sessionOfCgroup("daemon") != "" {
		t.Errorf("cgroupName %q, session back %q", name, sessionOfCgroup(name))
	}
}

// Each growth of memory.events oom_kill or pids.events max is reported
// once; an unchanged counter is not reported again.
func TestCgroupLimitCounters(t *testing.T) {
	var codes []string
	s := &sessionCgroup{counts: map[string]int64{}, onLimit: func(c string) { codes = append(codes, c) }}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		s.checkLimit(p)
		return p
	}
	write("pids.events", "max 0\n")
	write("pids.events", "max 3\n")
	write("pids.events", "max 3\n")
	write("memory.events", "low 0\nhigh 4\nmax 9\noom 1\noom_kill 1\n")
	write("memory.events", "low 0\nhigh 5\nmax 10\noom 1\noom_kill 1\n")
	write("pids.events", "max 4\n")
	want := []string{LimitPids, LimitMemory, LimitPids}
	if len(codes) != len(want) {
		t.Fatalf("reported %v, want %v", codes, want)
	}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("reported %v, want %v", codes, want)
		}
	}
}
