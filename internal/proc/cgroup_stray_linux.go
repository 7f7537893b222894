package proc

import (
	"context"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killStrays SIGKILLs every process in sessiond-<stateId> itself and waits
// up to d for them to exit. No process belongs there (sessions live in the
// cgroups below it, the daemon never enters it): a member is a descendant
// of one of our sessions that moved itself up, an escapee of ours whatever
// its env says. It returns the strays still alive when d ran out.
func (g *Cgroups) killStrays(ctx context.Context, d time.Duration) []Identity {
	pids, err := members(g.dir)
	if err != nil || len(pids) == 0 {
		return nil
	}
	var hs []handle
	defer func() { closeHandles(hs) }()
	r, rerr := newStatReader()
	if rerr == nil {
		defer r.close()
	}
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		// checked after the pidfd is open: a reused pid is never hit
		id := Identity{PID: pid}
		if rerr == nil {
			if full, _, err := identityOf(r, pid); err == nil {
				id = full
			}
		}
		if !inCgroup(pid, g.rel) || unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0) != nil {
			unix.Close(fd)
			continue
		}
		g.log.Info("signalled", "pid", pid, "signal", "SIGKILL", "via", "stray", "cgroup", g.dir,
			"why", "a process in the daemon's own cgroup directory left its session's cgroup")
		hs = append(hs, handle{id: id, fd: fd})
	}
	deadline := time.Now().Add(d)
	for len(hs) > 0 {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		done, err := pollExited(hs, int(min(left, pollSlice).Milliseconds())+1)
		if err != nil {
			break
		}
		hs = keepLive(hs, done)
	}
	out := make([]Identity, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.id)
	}
	return out
}

// sweepEscapees runs after the cgroup ladder: it stops the processes of
// ours the cgroup no longer holds — strays in sessiond-<stateId> itself,
// then the fallback tree (our tags, the root's group) wherever they moved —
// and folds what it cannot prove gone into v (tree live).
func (c *Child) sweepEscapees(ctx context.Context, l Ladder, v Verdict) Verdict {
	if ctx.Err() != nil {
		return v
	}
	strays := c.cg.g.killStrays(ctx, l.KillTimeout)
	x := newRun(c.log, nil, Identity{}, c.tags)
	defer x.close()
	x.q.group, x.q.sid = c.id.PID, c.sid
	x.rescan()
	var sw Verdict
	if len(x.members) > 0 {
		c.log.Info("processes of the session outside its cgroup", c.tags.attr(), "count", len(x.members))
		sw = x.ladder(ctx, l, false)
		v.Signalled = v.Signalled || sw.Signalled
	} else if x.blind {
		sw.Tree = Unverifiable
	}
	v.Survivors = append(v.Survivors, strays...)
	v.Survivors = append(v.Survivors, sw.Survivors...)
	switch {
	case len(strays) > 0 || sw.Tree == Live:
		v.Tree = Live
	case sw.Tree == Unverifiable && v.Tree == Exited:
		v.Tree = Unverifiable
	}
	return v
}
