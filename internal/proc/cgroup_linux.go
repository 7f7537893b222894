package proc

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Cgroups is the daemon's cgroup v2 directory sessiond-<stateId> and the
// one watcher of its sessions' event files. Nil means fallback mode.
type Cgroups struct {
	base   string // the directory sessiond-<stateId> is in
	dir    string // absolute path of sessiond-<stateId>
	rel    string // the same as /proc/<pid>/cgroup shows it
	limits Limits // enforced ones only
	kill   bool   // cgroup.kill exists
	log    *slog.Logger
	w      *watcher
	status CgroupStatus

	liveMu sync.Mutex
	live   map[string]bool // session cgroups of children spawned or adopted: never stale
	mu     sync.Mutex      // serialises recreate
}

// OpenCgroups finds a writable cgroup v2 directory (o.Root, else the
// daemon's own cgroup), creates sessiond-<StateID> in it, enables the
// controllers the limits need where they are available and starts the
// watcher. When it cannot, it returns nil and a fallback status whose
// Reason says why; nothing is left behind.
func OpenCgroups(o CgroupOptions, log *slog.Logger) (*Cgroups, CgroupStatus) {
	log = orDiscard(log)
	kept := o.KeptInotify
	defer func() {
		if kept > 0 {
			// Not reused (fallback mode now): its teardown waits for the
			// kernel, so it is closed on a goroutine of its own.
			syscall.CloseOnExec(kept)
			go unix.Close(kept)
		}
	}()
	fallback := func(err error) (*Cgroups, CgroupStatus) {
		st := CgroupStatus{Mode: ModeFallback, Reason: err.Error(), Controllers: []string{}}
		st.Notes = limitNotes(o.Limits, nil, "fallback mode: limits need a cgroup")
		return nil, st
	}
	if o.StateID == "" || strings.ContainsAny(o.StateID, "/\n") {
		return fallback(fmt.Errorf("bad state id %q", o.StateID[:min(len(o.StateID), 32)]))
	}
	root := o.Root
	if o.Kept != "" {
		root = o.Kept
	}
	base, rel, own, err := locateBase(root)
	if err != nil {
		return fallback(err)
	}
	name := "sessiond-" + o.StateID
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		how := "cgroup_root"
		if own {
			how = "the daemon's own cgroup (not delegated: set cgroup_root, or run under systemd with Delegate=yes)"
		}
		return fallback(fmt.Errorf("%s %s is not writable: %w", how, base, err))
	}
	g := &Cgroups{base: base, dir: dir, rel: filepath.Join(rel, name), log: log, live: map[string]bool{}}
	_, err = os.Stat(filepath.Join(dir, "cgroup.kill"))
	g.kill = err == nil
	if kept > 0 {
		g.w, err = adoptWatcher(kept)
		if err != nil {
			log.Warn("the previous image's inotify instance is not reused; a new one watches the cgroups", "err", err.Error())
		}
		kept = 0 // adopted, or not an inotify instance (not ours to close)
	}
	if g.w == nil {
		if g.w, err = newWatcher(); err != nil {
			os.Remove(dir)
			return fallback(fmt.Errorf("inotify: %w", err))
		}
	}
	enabled, notes := g.enableControllers(base, own, o.Limits)
	if slices.Contains(enabled, "memory") {
		g.limits.Memory = o.Limits.Memory
	}
	if slices.Contains(enabled, "pids") {
		g.limits.Pids = o.Limits.Pids
	}
	how := "cgroup_root " + base
	switch {
	case o.Kept != "":
		how = base + " (kept across a live upgrade)"
	case own:
		how = "the daemon's own cgroup " + base
	}
	g.status = CgroupStatus{Mode: ModeCgroup, Reason: "writable cgroup v2 under " + how, Dir: dir,
		Controllers: enabled, Kill: g.kill, Memory: g.limits.Memory, Pids: g.limits.Pids, Notes: notes}
	return g, g.status
}

// Inotify is the instance watching the cgroups' event files, for a live
// upgrade to hand to the next image (CgroupOptions.KeptInotify).
func (g *Cgroups) Inotify() syscall.Conn { return g.w.f }

// Base is the directory sessiond-<stateId> is in (handed to the next
// image by a live upgrade: CgroupOptions.Kept).
func (g *Cgroups) Base() string { return g.base }

// recreate makes sessiond-<stateId> again, with the controllers handed
// down as at start, after something removed it while the daemon ran
// (rmdir succeeds on an empty cgroup). Logged once per recreation.
func (g *Cgroups) recreate() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := os.Mkdir(g.dir, 0o755)
	if errors.Is(err, os.ErrExist) {
		return nil // another create made it meanwhile
	}
	if err != nil {
		return fmt.Errorf("recreate the daemon's cgroup directory: %w", err)
	}
	for _, c := range g.status.Controllers {
		if err := writeCg(filepath.Join(g.dir, "cgroup.subtree_control"), "+"+c); err != nil {
			g.log.Warn("cgroup controller not enabled again", "cgroup", g.dir, "controller", c, "err", err)
		}
	}
	g.log.Warn("the daemon's cgroup directory was removed while it ran: recreated", "cgroup", g.dir)
	return nil
}

// Status is the mode and why.
func (g *Cgroups) Status() CgroupStatus { return g.status }

// enableControllers turns on, for the sessions' cgroups, the controllers
// the limits need. A controller missing from base's cgroup.controllers
// (bound to a v1 hierarchy, or not delegated) is a note, not an error.
// When base is the daemon's own (non-root) cgroup, it first moves the
// daemon into base/daemon: cgroup v2 lets a cgroup with members hand no
// controller down.
func (g *Cgroups) enableControllers(base string, own bool, l Limits) ([]string, []string) {
	want := map[string]bool{"memory": l.Memory > 0, "pids": l.Pids > 0}
	avail := strings.Fields(readTrim(filepath.Join(base, "cgroup.controllers")))
	enabled := []string{}
	var notes []string
	for _, c := range []string{"memory", "pids"} {
		if !want[c] {
			continue
		}
		if !slices.Contains(avail, c) {
			notes = append(notes, c+": controller not available in "+base+" (bound to a cgroup v1 hierarchy, or not delegated): limit not enforced")
			continue
		}
		err := writeCg(filepath.Join(base, "cgroup.subtree_control"), "+"+c)
		if errors.Is(err, unix.EBUSY) && own {
			if err = g.moveSelf(base); err == nil {
				err = writeCg(filepath.Join(base, "cgroup.subtree_control"), "+"+c)
			}
		}
		if err == nil {
			err = writeCg(filepath.Join(g.dir, "cgroup.subtree_control"), "+"+c)
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: cannot enable the controller: %v: limit not enforced", c, err))
			continue
		}
		enabled = append(enabled, c)
	}
	for _, n := range notes {
		g.log.Warn("cgroup limit not enforced", "note", n)
	}
	return enabled, notes
}

// moveSelf moves the daemon into base/daemon (delegation's usual layout),
// when it is the only process in base (a service's cgroup); other
// processes there are not ours to move.
func (g *Cgroups) moveSelf(base string) error {
	if pids, err := members(base); err != nil || len(pids) != 1 || pids[0] != os.Getpid() {
		return fmt.Errorf("%s holds processes other than the daemon (%d): no controller can be handed down", base, len(pids))
	}
	leaf := filepath.Join(base, "daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := writeCg(filepath.Join(leaf, "cgroup.procs"), "0"); err != nil {
		return err
	}
	g.log.Info("moved the daemon into a leaf cgroup to delegate controllers", "cgroup", leaf)
	return nil
}

func limitNotes(l Limits, _ []string, why string) []string {
	var notes []string
	if l.Memory > 0 {
		notes = append(notes, "memory: "+why+": limit not enforced")
	}
	if l.Pids > 0 {
		notes = append(notes, "pids: "+why+": limit not enforced")
	}
	return notes
}

// Close stops the watcher and removes sessiond-<stateId> when no process
// is left in it: session cgroups emptied late (a stale one the bounded
// cleanup emptied) are removed first.
func (g *Cgroups) Close() {
	if g == nil {
		return
	}
	if des, err := os.ReadDir(g.dir); err == nil {
		for _, de := range des {
			p := filepath.Join(g.dir, de.Name())
			if ev, err := keyed(filepath.Join(p, "cgroup.events")); de.IsDir() && err == nil && ev["populated"] == 0 {
				removeTree(p)
			}
		}
	}
	if err := os.Remove(g.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		g.log.Warn("cgroup directory left", "cgroup", shortPath(g.dir), "err", err)
	}
	g.w.close()
}

// Dir is sessiond-<stateId>.
func (g *Cgroups) Dir() string { return g.dir }

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// writeCg writes one value to a cgroup interface file (no O_CREATE, no
// truncation: kernfs files take one write).
func writeCg(p, v string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// keyed reads a "key value" per line file (cgroup.events, memory.events).
func keyed(p string) (map[string]int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// members lists the pids in a cgroup.
func members(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// inCgroup reports whether pid's cgroup v2 path is rel.
func inCgroup(pid int, rel string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p == rel
		}
	}
	return false
}
