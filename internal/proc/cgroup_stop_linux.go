package proc

import (
	"context"
	"syscall"
	"time"
)

// stopCgroup is the close ladder of a child spawned into its cgroup (stdin
// already closed): wait Grace for the root's exit and populated 0; SIGTERM
// every member, wait TermTimeout; cgroup.kill, wait KillTimeout. The tree
// is the cgroup's members and exited means populated 0 was read after the
// child ran in it; then the cgroup is removed. A descendant can move
// itself out (as root, or within a delegated subtree): sweepEscapees then
// stops the strays in sessiond-<stateId> and the session's tagged/grouped
// processes elsewhere, and the verdict is exited only if they are gone.
func (c *Child) stopCgroup(ctx context.Context, l Ladder) Verdict {
	return c.sweepEscapees(ctx, l, c.cgroupLadder(ctx, l))
}

// cgroupLadder is stopCgroup's ladder on the cgroup's members.
func (c *Child) cgroupLadder(ctx context.Context, l Ladder) Verdict {
	s := c.cg
	signalled := false
	if c.waitTree(ctx, l.Grace) || ctx.Err() != nil {
		return c.cgroupVerdict(signalled)
	}
	signalled = c.signalMembers(syscall.SIGTERM) || signalled
	if c.waitTree(ctx, l.TermTimeout) || ctx.Err() != nil {
		return c.cgroupVerdict(signalled)
	}
	if s.g.killMembers(s.dir) > 0 {
		signalled = true
		c.log.Info("signalled", c.tags.attr(), "pid", c.id.PID, "signal", "SIGKILL",
			"root", true, "via", "cgroup.kill", "cgroup", s.dir)
	}
	c.waitTree(ctx, l.KillTimeout)
	return c.cgroupVerdict(signalled)
}

// waitTree waits up to d for the root's Wait and the cgroup's populated 0.
func (c *Child) waitTree(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	exited, empty := c.exited, c.cg.empty
	for exited != nil || empty != nil {
		select {
		case <-exited:
			exited = nil
		case <-empty:
			empty = nil
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// signalMembers sends sig to every process in the cgroup and in the
// cgroups a member created below it: the root through its own handle, the
// others through pidfds checked to be members.
func (c *Child) signalMembers(sig syscall.Signal) bool {
	any := false
	err := walkMembers(c.cg.dir, c.cg.rel, func(pid int, rel string) {
		ok := false
		if pid == c.id.PID {
			ok = c.process.Signal(sig) == nil // c.cmd is nil for an adopted child
		} else {
			ok = signalInCgroup(pid, rel, sig)
		}
		if ok {
			any = true
			c.log.Info("signalled", c.tags.attr(), "pid", pid, "signal", signalName(sig),
				"root", pid == c.id.PID, "via", "cgroup")
		}
	})
	if err != nil {
		c.log.Warn("cgroup members unreadable", c.tags.attr(), "cgroup", c.cg.dir, "err", err)
	}
	return any
}

// cgroupVerdict says what is proven; an empty cgroup is removed, one still
// populated rides on the verdict to the bounded cleanup.
func (c *Child) cgroupVerdict(signalled bool) Verdict {
	v := Verdict{Signalled: signalled, Root: Exited, Tree: Exited}
	select {
	case <-c.exited:
		e := c.Exit()
		v.Code, v.Signal = e.Code, e.Signal
	default:
		v.Root = Live
		v.Survivors = append(v.Survivors, c.id)
	}
	if c.cg.isEmpty() {
		if err := c.cg.remove(); err != nil {
			c.log.Warn("cgroup not removed", c.tags.attr(), "err", err)
		}
		return v
	}
	v.Tree = Live
	v.cgroup = c.cg
	if pids, err := members(c.cg.dir); err == nil {
		r, rerr := newStatReader()
		for _, pid := range pids {
			if pid == c.id.PID {
				continue
			}
			id := Identity{PID: pid}
			if rerr == nil {
				id, _, _ = identityOf(r, pid)
			}
			v.Survivors = append(v.Survivors, id)
		}
		if rerr == nil {
			r.close()
		}
	}
	return v
}

// Usage is the child's cgroup's memory and process count; ok is false in
// fallback mode.
func (c *Child) Usage() (Usage, bool) {
	if c.cg == nil {
		return Usage{}, false
	}
	return c.cg.usage(), true
}

// Cgroup is the child's cgroup directory ("" in fallback mode).
func (c *Child) Cgroup() string {
	if c.cg == nil {
		return ""
	}
	return c.cg.dir
}
