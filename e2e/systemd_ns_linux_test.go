package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// cgroupHierarchy is one cgroup filesystem the user manager needs: where
// it is mounted on the machine and how to mount it in the namespace.
type cgroupHierarchy struct {
	dir   string // mount point, e.g. /sys/fs/cgroup/unified
	mount string // mount command run in the namespace
}

// cgroupHierarchies finds the layout: pure cgroup2 (/sys/fs/cgroup), or
// hybrid (/sys/fs/cgroup/unified + the named systemd v1 hierarchy). Any
// other layout skips the test.
func cgroupHierarchies(t *testing.T) []cgroupHierarchy {
	t.Helper()
	isType := func(dir string, magic int64) bool {
		var st unix.Statfs_t
		return unix.Statfs(dir, &st) == nil && st.Type == magic
	}
	switch {
	case isType("/sys/fs/cgroup", unix.CGROUP2_SUPER_MAGIC):
		return []cgroupHierarchy{{"/sys/fs/cgroup", "mount -t cgroup2 cgroup2 /sys/fs/cgroup"}}
	case isType("/sys/fs/cgroup/unified", unix.CGROUP2_SUPER_MAGIC) && isType("/sys/fs/cgroup/systemd", unix.CGROUP_SUPER_MAGIC):
		return []cgroupHierarchy{
			{"/sys/fs/cgroup/systemd", "mkdir /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd"},
			{"/sys/fs/cgroup/unified", "mkdir /sys/fs/cgroup/unified && mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified"},
		}
	}
	t.Skip("unknown cgroup layout (neither cgroup2 nor hybrid): no contained user manager")
	return nil
}

// managerScript moves the shell into a cgroup of its own in each
// hierarchy, enters new mount and cgroup namespaces (the cgroup namespace
// is rooted at that cgroup), mounts the hierarchies afresh so the manager
// sees only its subtree, makes /run/systemd/system exist, and execs
// systemd --user ($0). The pid stays the same throughout.
func managerScript(hs []cgroupHierarchy) string {
	var mkdirs, mounts []string
	for _, h := range hs {
		mkdirs = append(mkdirs, `mkdir "`+h.dir+`/sessiond-test-$$" && echo $$ > "`+h.dir+`/sessiond-test-$$/cgroup.procs"`)
		mounts = append(mounts, h.mount)
	}
	inner := strings.Join(append([]string{
		"set -e",
		"mount -t tmpfs tmpfs /run/systemd && mkdir /run/systemd/system",
		"mount -t tmpfs cgroup /sys/fs/cgroup",
	}, append(mounts, `exec "$0" --user`)...), "\n")
	if len(hs) == 1 { // pure cgroup2: the tmpfs would hide the mount point itself
		inner = strings.Replace(inner, "mount -t tmpfs cgroup /sys/fs/cgroup\n", "", 1)
	}
	return strings.Join(append(append([]string{"set -e", "mkdir -p /run/systemd"}, mkdirs...),
		`exec unshare -m -C --propagation private /bin/sh -c '`+inner+`' "$0"`), "\n")
}

// removeCgroups removes the test's cgroup subtree (deepest first) once the
// manager and its units are gone.
func removeCgroups(t *testing.T, hs []cgroupHierarchy, own string) {
	for _, h := range hs {
		root := filepath.Join(h.dir, own)
		var dirs []string
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			if err := os.Remove(d); err != nil {
				t.Logf("cgroup %s left: %v", d, err)
			}
		}
	}
}
