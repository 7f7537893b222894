package config

import (
	"errors"
	"strings"
	"testing"
)

func TestCgroupKeys(t *testing.T) {
	c := Default()
	if err := Parse("cgroup_root = \"/sys/fs/cgroup/me/\"\n[limits]\nmemory = \"4GiB\"\npids = 512\n", &c); err != nil {
		t.Fatal(err)
	}
	if c.CgroupRoot != "/sys/fs/cgroup/me" || c.Limits.Memory != 4<<30 || c.Limits.Pids != 512 {
		t.Fatalf("got root %q limits %+v", c.CgroupRoot, c.Limits)
	}
	zero := Default()
	zero.Limits = Limits{Memory: 1, Pids: 1}
	if err := Parse("[limits]\nmemory = \"0\"\npids = 0\n", &zero); err != nil || zero.Limits != (Limits{}) {
		t.Fatalf("0 is no limit: err %v, limits %+v", err, zero.Limits)
	}
	if d := Default(); d.Limits != (Limits{}) || d.CgroupRoot != "" {
		t.Fatalf("defaults must set no limit and no root: %+v %q", d.Limits, d.CgroupRoot)
	}
	for _, tc := range []struct{ text, has string }{
		{"cgroup_root = \"relative/dir\"", "cgroup_root"},
		{"cgroup_root = \"/" + strings.Repeat("a", 5000) + "\"", "at most 4096"},
		{"[limits]\nmemory = \"4GB\"", "limits.memory"},
		{"[limits]\nmemory = \"1MiB\"", "from 4MiB"},
		{"[limits]\nmemory = \"-1\"", "limits.memory"},
		{"[limits]\npids = 1", "limits.pids = 1: want 16 .. 4194304, or 0 for none"},
		{"[limits]\npids = 15", "limits.pids = 15"},
		{"[limits]\npids = -1", "limits.pids"},
		{"[limits]\npids = 5000000", "limits.pids"},
		{"[limits]\ncpu = 2", "limits.cpu"},
	} {
		c := Default()
		err := Parse(tc.text, &c)
		if err == nil || !strings.Contains(err.Error(), tc.has) {
			t.Errorf("%q: err %v, want one naming %q", tc.text, err, tc.has)
		}
		if err != nil && !errors.Is(err, ErrBadValue) && !errors.Is(err, ErrUnknownKey) {
			t.Errorf("%q: err %v is neither ErrBadValue nor ErrUnknownKey", tc.text, err)
		}
		if len(err.Error()) > 300 {
			t.Errorf("%q: error echoes too much of the value (%d bytes)", tc.text[:20], len(err.Error()))
		}
	}
	for in, want := range map[string]int64{"1048576": 1 << 20, "512MiB": 512 << 20, "2 GiB": 2 << 30, "1TiB": 1 << 40, "10B": 10, "3KiB": 3 << 10} {
		if n, err := ParseSize(in); err != nil || n != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
}
