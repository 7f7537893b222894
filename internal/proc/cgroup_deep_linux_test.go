package proc

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A chain of sub-cgroups whose path is longer than PATH_MAX (made, as a
// descendant could, relative to directory fds) is removed with its
// session cgroup.
func TestCgroupRemoveDeepChain(t *testing.T) {
	g := openTestCgroups(t, Limits{})
	s, err := g.create(testTags(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readTrim(s.dir + "/cgroup.max.depth"); got != "32" {
		t.Errorf("cgroup.max.depth %q, want 32", got)
	}
	fd, err := unix.Open(s.dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 200)
	depth := 0
	for total := len(s.dir); total <= unix.PathMax+200; total += len(name) + 1 {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			unix.Close(fd)
			t.Fatalf("mkdir at depth %d: %v", depth, err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
		depth++
	}
	unix.Close(fd)
	if err := s.remove(); err != nil {
		t.Fatalf("remove with a %d-deep chain below: %v", depth, err)
	}
	if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("session cgroup %s left (%v)", s.dir, err)
	}
}
