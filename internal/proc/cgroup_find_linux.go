package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// cgMount is one cgroup2 mount of /proc/self/mountinfo: the cgroup path it
// shows (root) at point.
type cgMount struct{ root, point string }

// mountinfoPath and selfCgroupPath are where the mounts and the daemon's
// own cgroup are read.
const (
	mountinfoPath  = "/proc/self/mountinfo"
	selfCgroupPath = "/proc/self/cgroup"
)

// cgroup2Mounts lists the cgroup2 mounts (fstype after the " - " separator).
func cgroup2Mounts() ([]cgMount, error) {
	b, err := os.ReadFile(mountinfoPath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", mountinfoPath, err)
	}
	var out []cgMount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if f := strings.Fields(post); len(f) == 0 || f[0] != "cgroup2" {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		out = append(out, cgMount{root: unescapeMount(f[3]), point: unescapeMount(f[4])})
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, …).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, ok := octal3(s[i+1 : i+4]); ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal3(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	var v int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v*8 + int(c-'0')
	}
	return byte(v), v < 256
}

// ownCgroup is the daemon's cgroup v2 path (the "0::" line).
func ownCgroup() (string, error) {
	b, err := os.ReadFile(selfCgroupPath)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", selfCgroupPath, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 line (0::) in " + selfCgroupPath)
}

// locateBase finds the directory our sessiond-<stateId> goes under and
// its cgroup path as /proc/<pid>/cgroup shows it: the configured root, or
// the daemon's own cgroup. own reports the latter.
func locateBase(configured string) (dir, rel string, own bool, err error) {
	mounts, err := cgroup2Mounts()
	if err != nil {
		return "", "", false, err
	}
	if len(mounts) == 0 {
		return "", "", false, errors.New("no cgroup2 filesystem is mounted (a cgroup v1-only host)")
	}
	if configured != "" {
		return locateConfigured(configured, mounts)
	}
	p, err := ownCgroup()
	if err != nil {
		return "", "", false, err
	}
	for _, m := range mounts {
		if rest, ok := cutCgroupPrefix(p, m.root); ok {
			return filepath.Join(m.point, rest), p, true, nil
		}
	}
	return "", "", false, fmt.Errorf("own cgroup %s is under no cgroup2 mount", p)
}

func locateConfigured(configured string, mounts []cgMount) (dir, rel string, own bool, err error) {
	path, err := filepath.EvalSymlinks(configured)
	if err != nil {
		return "", "", false, fmt.Errorf("cgroup_root %s: %w", configured, err)
	}
	if fi, err := os.Stat(path); err != nil {
		return "", "", false, fmt.Errorf("cgroup_root %s: %w", configured, err)
	} else if !fi.IsDir() {
		return "", "", false, fmt.Errorf("cgroup_root %s is not a directory", configured)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return "", "", false, fmt.Errorf("cgroup_root %s: statfs: %w", configured, err)
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return "", "", false, fmt.Errorf("cgroup_root %s is not on a cgroup2 filesystem", configured)
	}
	best := -1
	for i, m := range mounts {
		if _, ok := cutCgroupPrefix(path, m.point); ok && (best < 0 || len(m.point) > len(mounts[best].point)) {
			best = i
		}
	}
	if best < 0 {
		return "", "", false, fmt.Errorf("cgroup_root %s is under no cgroup2 mount point", configured)
	}
	rest, _ := cutCgroupPrefix(path, mounts[best].point)
	return path, filepath.Join(mounts[best].root, rest), false, nil
}

// cutCgroupPrefix is p below prefix (path-wise), as a relative path.
func cutCgroupPrefix(p, prefix string) (string, bool) {
	if prefix == "/" {
		if rest, ok := strings.CutPrefix(p, "/"); ok {
			return rest, true
		}
		return "", false
	}
	if p == prefix {
		return "", true
	}
	if rest, ok := strings.CutPrefix(p, prefix+"/"); ok {
		return rest, true
	}
	return "", false
}
