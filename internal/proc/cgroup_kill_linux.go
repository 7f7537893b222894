package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killDir empties a cgroup and removes it: cgroup.kill (SIGKILL to each
// member where the kernel has no cgroup.kill), then a wait for populated 0
// on the watcher, bounded by d and ctx, then rmdir of it and of any
// cgroups a member created below it. A cgroup already gone is no error.
func (g *Cgroups) killDir(ctx context.Context, dir string, d time.Duration) error {
	empty := make(chan struct{})
	var once sync.Once
	check := func() {
		if ev, err := keyed(filepath.Join(dir, "cgroup.events")); err == nil && ev["populated"] == 0 {
			once.Do(func() { close(empty) })
		}
	}
	wd, err := g.w.add(filepath.Join(dir, "cgroup.events"), check)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	defer g.w.remove(wd)
	check()
	select {
	case <-empty:
	default:
		g.killMembers(dir)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-empty:
		case <-t.C:
			return fmt.Errorf("cgroup %s still populated %v after SIGKILL", dir, d)
		case <-ctx.Done():
			return fmt.Errorf("cgroup %s: %w", dir, context.Cause(ctx))
		}
	}
	return removeTree(dir)
}

// killMembers sends SIGKILL to every process in dir and below: one write
// of cgroup.kill, else each member by pidfd, checked to be in the cgroup
// after the pidfd was opened.
func (g *Cgroups) killMembers(dir string) int {
	if g.kill {
		if err := writeCg(filepath.Join(dir, "cgroup.kill"), "1"); err == nil {
			return 1
		}
	}
	n := 0
	walkMembers(dir, g.rel+strings.TrimPrefix(dir, g.dir), func(pid int, rel string) {
		if signalInCgroup(pid, rel, syscall.SIGKILL) {
			n++
		}
	})
	return n
}

// walkMembers calls fn with every member of dir and of the cgroups below
// it, with the member's cgroup path as /proc/<pid>/cgroup shows it (rel is
// dir's). The error is dir's own cgroup.procs being unreadable.
func walkMembers(dir, rel string, fn func(pid int, rel string)) error {
	var first error
	filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil || !de.IsDir() {
			return nil
		}
		pids, err := members(p)
		if err != nil && p == dir {
			first = err
		}
		for _, pid := range pids {
			fn(pid, rel+strings.TrimPrefix(p, dir))
		}
		return nil
	})
	return first
}

// signalInCgroup signals pid through a pidfd opened first and checked to
// name a process of cgroup rel, so a reused pid is never hit.
func signalInCgroup(pid int, rel string, sig syscall.Signal) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if !inCgroup(pid, rel) {
		return false
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0) == nil
}

// removeTree removes dir and the cgroups below it, deepest first.
func removeTree(dir string) error {
	var dirs []string
	filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err == nil && de.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove cgroup %s: %w", d, err)
		}
	}
	return nil
}

// ReapStale kills and removes every session cgroup a previous run of this
// state dir left in sessiond-<stateId> (membership survives the daemon's
// death, so nothing of that run escapes). It returns the cgroups removed;
// one it cannot empty within d is logged and named in the error.
func (g *Cgroups) ReapStale(ctx context.Context, d time.Duration) (int, error) {
	des, err := os.ReadDir(g.dir)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", g.dir, err)
	}
	n := 0
	var errs []error
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		dir := filepath.Join(g.dir, de.Name())
		pids, _ := members(dir)
		if err := g.killDir(ctx, dir, d); err != nil {
			g.log.Error("stale cgroup not emptied", "cgroup", dir, "session_id", sessionOfCgroup(de.Name()), "err", err)
			errs = append(errs, err)
			continue
		}
		n++
		g.log.Info("stale cgroup reaped", "cgroup", dir, "session_id", sessionOfCgroup(de.Name()), "members", len(pids))
	}
	return n, errors.Join(errs...)
}

// reladder is the bounded cleanup's attempt at a cgroup still populated:
// cgroup.kill, wait KillTimeout for populated 0, remove it.
func (s *sessionCgroup) reladder(ctx context.Context, l Ladder) Verdict {
	if err := s.g.killDir(ctx, s.dir, l.KillTimeout); err != nil {
		v := Verdict{Root: Exited, Tree: Live, Signalled: true, cgroup: s}
		if pids, err := members(s.dir); err == nil {
			for _, pid := range pids {
				v.Survivors = append(v.Survivors, Identity{PID: pid})
			}
		}
		return v
	}
	s.remove()
	return Verdict{Root: Exited, Tree: Exited, Signalled: true}
}
