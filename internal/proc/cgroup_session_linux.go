package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sessionCgroup is one child's cgroup: <dir>/<session>.f<fence>.
type sessionCgroup struct {
	g       *Cgroups
	dir     string
	rel     string
	onLimit func(code string)

	armed   atomic.Bool   // the child was spawned into it: populated 0 now proves the tree gone
	empty   chan struct{} // closed on the first populated 0 after armed
	once    sync.Once
	wds     []int32
	mu      sync.Mutex // guards the counters below
	counts  map[string]int64
	removed bool
}

// create makes the session's cgroup, writes the limits and watches its
// event files. The caller spawns into it (fd from open) and calls arm.
func (g *Cgroups) create(t Tags, onLimit func(code string)) (*sessionCgroup, error) {
	name := cgroupName(t)
	s := &sessionCgroup{g: g, dir: filepath.Join(g.dir, name), rel: g.rel + "/" + name,
		onLimit: onLimit, empty: make(chan struct{}), counts: map[string]int64{}}
	err := os.Mkdir(s.dir, 0o755)
	if errors.Is(err, os.ErrNotExist) {
		// sessiond-<stateId> was removed under us: make it again
		if err = g.recreate(); err == nil {
			err = os.Mkdir(s.dir, 0o755)
		}
	}
	if errors.Is(err, os.ErrExist) {
		// a leftover of the same fence (a spawn that failed before): empty it
		if err := g.killDir(context.Background(), s.dir, time.Second); err != nil {
			return nil, err
		}
		err = os.Mkdir(s.dir, 0o755)
	}
	if err != nil {
		return nil, fmt.Errorf("create session cgroup: %w", err) // err names the path
	}
	if err = s.limit(); err != nil {
		os.Remove(s.dir)
		return nil, err
	}
	wd, err := g.w.add(filepath.Join(s.dir, "cgroup.events"), s.checkEmpty)
	if err != nil {
		os.Remove(s.dir)
		return nil, fmt.Errorf("watch %s: %w", s.dir, err)
	}
	s.wds = append(s.wds, wd)
	s.watchLimits()
	g.setLive(name, true)
	return s, nil
}

// watchLimits watches the event files of the enforced limits.
func (s *sessionCgroup) watchLimits() {
	for _, f := range []string{"memory.events", "pids.events"} {
		if s.g.limits.Memory == 0 && f == "memory.events" || s.g.limits.Pids == 0 && f == "pids.events" {
			continue
		}
		p := filepath.Join(s.dir, f)
		if wd, err := s.g.w.add(p, func() { s.checkLimit(p) }); err == nil {
			s.wds = append(s.wds, wd)
		}
	}
}

// adoptCgroup finds, after a live upgrade, the cgroup an adopted child
// runs in (the one the image before spawned it into): watched and armed
// again, its limit counters taken as they are (a hit before the upgrade
// was reported then). nil when the child is not in one (the image before
// ran in fallback mode): it is then stopped the fallback way.
func (g *Cgroups) adoptCgroup(t Tags, pid int, onLimit func(code string)) (*sessionCgroup, error) {
	if g == nil {
		return nil, nil
	}
	name := cgroupName(t)
	s := &sessionCgroup{g: g, dir: filepath.Join(g.dir, name), rel: g.rel + "/" + name,
		onLimit: onLimit, empty: make(chan struct{}), counts: map[string]int64{}}
	if !inCgroup(pid, s.rel) {
		return nil, nil
	}
	if ev, err := keyed(filepath.Join(s.dir, "memory.events")); err == nil {
		s.counts["oom_kill"] = ev["oom_kill"]
	}
	if ev, err := keyed(filepath.Join(s.dir, "pids.events")); err == nil {
		s.counts["max"] = ev["max"]
	}
	wd, err := g.w.add(filepath.Join(s.dir, "cgroup.events"), s.checkEmpty)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", s.dir, err)
	}
	s.wds = append(s.wds, wd)
	s.watchLimits()
	g.setLive(name, true)
	s.arm()
	return s, nil
}

// setLive marks a session cgroup as a live child's (ReapStale skips it).
func (g *Cgroups) setLive(name string, live bool) {
	g.liveMu.Lock()
	defer g.liveMu.Unlock()
	if live {
		g.live[name] = true
	} else {
		delete(g.live, name)
	}
}

func (g *Cgroups) isLive(name string) bool {
	g.liveMu.Lock()
	defer g.liveMu.Unlock()
	return g.live[name]
}

// limit writes the enforced limits: memory.high at 90% of memory.max, so
// reclaim presses before the OOM killer acts.
func (s *sessionCgroup) limit() error {
	l := s.g.limits
	var ws [][2]string
	if l.Memory > 0 {
		ws = append(ws, [2]string{"memory.high", fmt.Sprint(l.Memory - l.Memory/10)}, [2]string{"memory.max", fmt.Sprint(l.Memory)})
	}
	if l.Pids > 0 {
		ws = append(ws, [2]string{"pids.max", fmt.Sprint(l.Pids)})
	}
	for _, w := range ws {
		if err := writeCg(filepath.Join(s.dir, w[0]), w[1]); err != nil {
			return fmt.Errorf("cgroup %s: write %s: %w", s.dir, w[0], err)
		}
	}
	// Sub-cgroups a descendant may make: bounded, so removal stays cheap
	// (best effort: a kernel without the files just has no bound).
	writeCg(filepath.Join(s.dir, "cgroup.max.depth"), fmt.Sprint(MaxSubDepth))
	writeCg(filepath.Join(s.dir, "cgroup.max.descendants"), fmt.Sprint(MaxSubCgroups))
	return nil
}

// Bounds written to each session cgroup's cgroup.max.depth and
// cgroup.max.descendants: a provider's tree may make sub-cgroups (a
// container runtime, systemd-run), within these.
const (
	MaxSubDepth   = 32
	MaxSubCgroups = 1024
)

// open is the directory fd clone3 spawns into (CLONE_INTO_CGROUP).
func (s *sessionCgroup) open() (*os.File, error) {
	return os.OpenFile(s.dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
}

// arm is called once the child runs in the cgroup: from now on populated 0
// proves the whole tree gone (nothing enters a cgroup but its members'
// children).
func (s *sessionCgroup) arm() {
	s.armed.Store(true)
	s.checkEmpty()
}

// checkEmpty reads cgroup.events (on every inotify event of it).
func (s *sessionCgroup) checkEmpty() {
	if !s.armed.Load() {
		return
	}
	ev, err := keyed(filepath.Join(s.dir, "cgroup.events"))
	if err != nil || ev["populated"] != 0 {
		return
	}
	s.once.Do(func() { close(s.empty) })
}

// checkLimit reports each new oom_kill (memory.events) or refused fork
// (pids.events max) once per change of the counter.
func (s *sessionCgroup) checkLimit(p string) {
	ev, err := keyed(p)
	if err != nil {
		return
	}
	key, code := "oom_kill", LimitMemory
	if filepath.Base(p) == "pids.events" {
		key, code = "max", LimitPids
	}
	s.mu.Lock()
	n := ev[key]
	grew := n > s.counts[key]
	s.counts[key] = n
	s.mu.Unlock()
	if grew && s.onLimit != nil {
		s.onLimit(code)
	}
}

// isEmpty reports whether populated 0 was seen since arm.
func (s *sessionCgroup) isEmpty() bool {
	select {
	case <-s.empty:
		return true
	default:
		return false
	}
}

// remove drops the watches and the directory (once the cgroup is empty).
func (s *sessionCgroup) remove() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil
	}
	for _, wd := range s.wds {
		s.g.w.remove(wd)
	}
	if err := removeTree(s.dir); err != nil {
		return err
	}
	s.removed = true
	s.g.setLive(filepath.Base(s.dir), false)
	return nil
}

// usage reads memory.current and the member count.
func (s *sessionCgroup) usage() Usage {
	u := Usage{MemoryBytes: -1, Procs: -1}
	if m, err := members(s.dir); err == nil {
		u.Procs = len(m)
	}
	if b := readTrim(filepath.Join(s.dir, "memory.current")); b != "" {
		fmt.Sscan(b, &u.MemoryBytes)
	}
	return u
}

// intoCgroup creates the spawn's cgroup and sets clone3's CgroupFD on attr:
// the child starts inside it, with no window outside. The caller closes
// the returned file after Start and arms (or removes) the cgroup.
func (spec Spec) intoCgroup(attr *syscall.SysProcAttr) (*sessionCgroup, *os.File, error) {
	if spec.Cgroups == nil {
		return nil, nil, nil
	}
	cg, err := spec.Cgroups.create(spec.Tags, spec.OnLimit)
	if err != nil {
		return nil, nil, err
	}
	f, err := cg.open()
	if err != nil {
		cg.remove()
		return nil, nil, fmt.Errorf("open cgroup %s: %w", cg.dir, err)
	}
	attr.UseCgroupFD, attr.CgroupFD = true, int(f.Fd())
	return cg, f, nil
}
