package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errPopulated: a cgroup still has members once its wait ran out.
var errPopulated = errors.New("still populated")

// shortPath is at most the last 160 bytes of a cgroup path, for logs and
// errors (a nested chain can be longer than PATH_MAX).
func shortPath(p string) string {
	const keep = 160
	if len(p) <= keep {
		return p
	}
	return "…" + p[len(p)-keep:]
}

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
			return fmt.Errorf("cgroup %s %w %v after SIGKILL", shortPath(dir), errPopulated, d)
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

// removeTree removes dir and the cgroups below it, deepest first. It walks
// with one directory fd at a time, down by name and back up by "..", and
// removes each cgroup relative to its parent's fd (unlinkat
// AT_REMOVEDIR): a chain a descendant made deeper than PATH_MAX is
// removed too. A cgroup already gone is no error; an error names at most
// a short suffix of the path.
func removeTree(dir string) error {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove cgroup %s: %w", shortPath(dir), err)
	}
	var down []string // names from dir to f
	for {
		sub, err := firstSubdir(f)
		if err != nil {
			f.Close()
			return fmt.Errorf("remove cgroup %s: read %d levels below: %w", shortPath(dir), len(down), err)
		}
		if sub != "" {
			fd, err := unix.Openat(int(f.Fd()), sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				f.Close()
				return fmt.Errorf("remove cgroup %s: open %d levels below: %w", shortPath(dir), len(down)+1, err)
			}
			f.Close()
			f = os.NewFile(uintptr(fd), sub)
			down = append(down, sub)
			continue
		}
		if len(down) == 0 {
			f.Close()
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove cgroup %s: %w", shortPath(dir), unwrapPath(err))
			}
			return nil
		}
		fd, err := unix.Openat(int(f.Fd()), "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		f.Close()
		if err != nil {
			return fmt.Errorf("remove cgroup %s: open the parent %d levels below: %w", shortPath(dir), len(down), err)
		}
		f = os.NewFile(uintptr(fd), "..")
		name := down[len(down)-1]
		down = down[:len(down)-1]
		if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			f.Close()
			return fmt.Errorf("remove cgroup %s: a cgroup %d levels below: %w", shortPath(dir), len(down)+1, err)
		}
	}
}

// firstSubdir is the name of one directory (a cgroup) in f, "" for none.
func firstSubdir(f *os.File) (string, error) {
	if _, err := f.Seek(0, 0); err != nil {
		return "", err
	}
	des, err := f.ReadDir(-1)
	if err != nil {
		return "", err
	}
	for _, de := range des {
		if de.IsDir() {
			return de.Name(), nil
		}
	}
	return "", nil
}

// unwrapPath drops an *os.PathError's path (the caller names it, short).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ReapStale kills and removes every session cgroup a previous run of this
// state dir left in sessiond-<stateId>, except those of children adopted
// from a live upgrade (membership survives the daemon's
// death, so nothing of that run escapes), and every stray in
// sessiond-<stateId> itself (killStrays). Every cgroup is killed first,
// then all are waited for together, bounded by d once. It returns the
// cgroups removed and the processes still alive when d ran out (frozen,
// or in uninterruptible sleep): the caller must not re-ladder those; their
// cgroup is left for a later attempt, logged and named in the error.
func (g *Cgroups) ReapStale(ctx context.Context, d time.Duration) (int, []Identity, error) {
	des, err := os.ReadDir(g.dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil // nothing left to reap
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", g.dir, err)
	}
	deadline := time.Now().Add(d)
	type stale struct {
		dir, session string
		pids         int
	}
	var all []stale
	for _, de := range des {
		if !de.IsDir() || g.isLive(de.Name()) { // an adopted child's (live upgrade)
			continue
		}
		st := stale{dir: filepath.Join(g.dir, de.Name()), session: sessionOfCgroup(de.Name())}
		pids, _ := members(st.dir)
		st.pids = len(pids)
		g.killMembers(st.dir) // all first: the waits below overlap
		all = append(all, st)
	}
	survivors := g.killStrays(ctx, time.Until(deadline))
	n := 0
	var errs []error
	for _, st := range all {
		err := g.killDir(ctx, st.dir, max(time.Until(deadline), 0))
		switch {
		case errors.Is(err, errPopulated):
			g.log.Error("stale cgroup not emptied", "cgroup", shortPath(st.dir), "session_id", st.session, "err", err)
			survivors = append(survivors, cgroupSurvivors(st.dir)...)
		case err != nil:
			g.log.Error("stale cgroup emptied but not removed", "cgroup", shortPath(st.dir), "session_id", st.session, "err", err)
		default:
			n++
			g.log.Info("stale cgroup reaped", "cgroup", st.dir, "session_id", st.session, "members", st.pids)
			continue
		}
		errs = append(errs, err)
	}
	return n, survivors, errors.Join(errs...)
}

// cgroupSurvivors are the identities of the processes in dir and below.
func cgroupSurvivors(dir string) []Identity {
	r, err := newStatReader()
	var out []Identity
	walkMembers(dir, "", func(pid int, _ string) {
		id := Identity{PID: pid}
		if err == nil {
			id, _, _ = identityOf(r, pid)
		}
		out = append(out, id)
	})
	if err == nil {
		r.close()
	}
	return out
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
