package echo

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgmoveFlag is the hidden flag naming where an /cgmove descendant goes.
const cgmoveFlag = "--cgmove"

// cgmoveModes are the /cgmove targets: "parent" (the cgroup above ours,
// env scrubbed), "root" (the cgroup2 mount's root cgroup, env and session
// tags kept), "sub" (a cgroup inner/ created below ours, env scrubbed,
// SIGTERM honoured).
var cgmoveModes = map[string]bool{"parent": true, "root": true, "sub": true}

// moveCgroup moves pid out of our cgroup as mode says (stage 1 of an
// /cgmove descendant does it before it reports the pid, so the move is
// done when the turn answers).
func moveCgroup(pid int, mode string) error {
	own, mnt, err := ownCgroupDir()
	if err != nil {
		return err
	}
	var dir string
	switch mode {
	case "parent":
		dir = filepath.Dir(own)
	case "root":
		dir = mnt
	case "sub":
		dir = filepath.Join(own, "inner")
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	default:
		return errors.New("bad /cgmove mode " + mode)
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// ownCgroupDir is our cgroup v2 directory and its mount point.
func ownCgroupDir() (dir, mnt string, err error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", "", err
	}
	rel := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel = p
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		if rest, ok := strings.CutPrefix(rel, strings.TrimSuffix(f[3], "/")); ok {
			return filepath.Join(f[4], rest), f[4], nil
		}
	}
	return "", "", errors.New("no cgroup2 mount holds " + rel)
}
