package proc

import (
	"context"
	"log/slog"
	"syscall"
	"time"
)

// pollSlice bounds one wait inside the ladder so cancellation is noticed.
const pollSlice = 50 * time.Millisecond

// run is one close ladder against a root and the rest of its tree.
type run struct {
	r         *statReader // nil: /proc unreadable, nothing but a child root can be handled
	log       *slog.Logger
	child     *Child   // the root when it is our waited-on child
	root      Identity // the root otherwise (PID 0: no root, a cleanup re-ladder)
	q         treeQuery
	members   map[int]Identity // live tree members (root excluded) as of the last scan
	signalled bool
	blind     bool // a scan failed: the tree cannot be proven gone
}

func newRun(log *slog.Logger, c *Child, root Identity, tags Tags) *run {
	x := &run{log: orDiscard(log), child: c, root: root, members: map[int]Identity{}}
	x.q.tags = tags
	r, err := newStatReader()
	if err != nil {
		x.blind = true
	} else {
		x.r = r
	}
	return x
}

func (x *run) close() {
	if x.r != nil {
		x.r.close()
	}
}

// rescan replaces members with the live tree: descendants of the root and of
// every member seen so far, the root's group, and processes with our tags.
func (x *run) rescan() {
	if x.r == nil {
		x.blind = true
		return
	}
	q := x.q
	q.known = sortedIDs(x.members)
	if x.child != nil {
		q.known = append(q.known, x.child.Recorded()...) // without a subreaper: reparented ones too
	}
	if x.rootID().PID > 0 {
		q.known = append(q.known, x.rootID())
	}
	m, err := x.r.tree(q)
	if err != nil {
		x.blind = true
		x.log.Warn("process tree scan failed", x.q.tags.attr(), "err", err)
		return
	}
	if id, ok := m[x.rootID().PID]; ok && id.StartTicks == x.rootID().StartTicks {
		delete(m, id.PID) // the root is handled on its own
	}
	x.members = m
}

func (x *run) rootID() Identity {
	if x.child != nil {
		return x.child.id
	}
	return x.root
}

// rootGone reports whether the root is proven gone (a child: waited for).
func (x *run) rootGone() bool {
	if x.child != nil {
		select {
		case <-x.child.exited:
			return true
		default:
			return false
		}
	}
	if x.root.PID <= 0 {
		return true
	}
	if x.r == nil {
		return false
	}
	return probeOne(x.r, x.root).Gone()
}

// signalAll rescans, then sends sig to the root (if not gone) and to every
// live member, each identity-checked right before through a pidfd.
func (x *run) signalAll(sig syscall.Signal) {
	x.rescan()
	if !x.rootGone() {
		if x.child != nil {
			// our own unwaited child: os.Process signals through its pidfd
			if err := x.child.process.Signal(sig); err == nil {
				x.sent(x.child.id, sig)
			}
		} else {
			x.signalOne(x.root, sig)
		}
	}
	for _, id := range sortedIDs(x.members) {
		x.signalOne(id, sig)
	}
}

func (x *run) signalOne(id Identity, sig syscall.Signal) {
	if x.r == nil {
		return
	}
	h, st := openVerified(x.r, id)
	if st != Alive {
		return
	}
	defer h.close()
	if err := h.signal(x.r, sig); err == nil {
		x.sent(id, sig)
	}
}

func (x *run) sent(id Identity, sig syscall.Signal) {
	x.signalled = true
	x.log.Info("signalled", x.q.tags.attr(), "pid", id.PID,
		"signal", signalName(sig), "root", id.PID == x.rootID().PID)
}

// waitGone waits up to d for the root and every known member to exit, on
// their pidfds (a probe loop where the kernel has none). It reports whether
// everything it knows of is gone.
func (x *run) waitGone(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	var hs []handle
	defer func() { closeHandles(hs) }()
	if x.r != nil {
		if !x.rootGone() {
			if h, st := openVerified(x.r, x.rootID()); st == Alive {
				hs = append(hs, h)
			} else if x.child == nil && st == Unverifiable {
				return false
			}
		}
		for _, id := range sortedIDs(x.members) {
			if h, st := openVerified(x.r, id); st == Alive {
				hs = append(hs, h)
			}
		}
	}
	for len(hs) > 0 {
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			return false
		}
		done, err := waitHandles(ctx, x.r, hs, min(remaining, pollSlice))
		if err != nil {
			return false
		}
		hs = keepLive(hs, done)
	}
	if x.child == nil {
		return true
	}
	// the root's pidfd fired: its Wait follows at once
	t := time.NewTimer(max(time.Until(deadline), 0))
	defer t.Stop()
	select {
	case <-x.child.exited:
		return true
	case <-t.C:
		return x.rootGone()
	case <-ctx.Done():
		return x.rootGone()
	}
}

// waitHandles waits up to d for some handles' processes to exit.
func waitHandles(ctx context.Context, r *statReader, hs []handle, d time.Duration) ([]bool, error) {
	if hs[0].fd >= 0 {
		return pollExited(hs, int(d.Milliseconds())+1)
	}
	// no pidfd: probe in short steps
	t := time.NewTimer(min(d, 10*time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	done := make([]bool, len(hs))
	for i, h := range hs {
		done[i] = probeOne(r, h.id).Gone()
	}
	return done, nil
}

func keepLive(hs []handle, done []bool) []handle {
	out := hs[:0]
	for i, h := range hs {
		if done[i] {
			h.close()
			continue
		}
		out = append(out, h)
	}
	return out
}

func closeHandles(hs []handle) {
	for _, h := range hs {
		h.close()
	}
}

// verdict rescans the tree and says what is proven.
func (x *run) verdict() Verdict {
	x.rescan()
	v := Verdict{Signalled: x.signalled, Root: Exited, Tree: Exited}
	switch {
	case x.child != nil && x.rootGone():
		e := x.child.Exit()
		v.Code, v.Signal = e.Code, e.Signal
	case x.child != nil:
		v.Root = Live
		v.Survivors = append(v.Survivors, x.child.id)
	case x.root.PID > 0:
		switch st := Probe(x.root); {
		case st == Alive:
			v.Root = Live
			v.Survivors = append(v.Survivors, x.root)
		case st == Unverifiable:
			v.Root = Unverifiable
		}
	}
	v.Survivors = append(v.Survivors, sortedIDs(x.members)...)
	switch {
	case x.blind || v.Root == Unverifiable:
		v.Tree = Unverifiable
	case len(v.Survivors) > 0:
		v.Tree = Live
	}
	return v
}

// Stop runs the close ladder: record the tree, close stdin, wait Grace for
// everything to exit; SIGTERM the root, its group and tree, wait
// TermTimeout; SIGKILL them, wait KillTimeout. It keeps going against the
// rest of the tree after the root exited. A child that exits on stdin EOF
// with nothing left behind gets no signal. When ctx ends, Stop sends no
// further signal and returns what is proven so far.
func (c *Child) Stop(ctx context.Context, l Ladder) Verdict {
	if c.cg != nil {
		if err := c.stdin.Close(); err != nil && !isClosed(err) {
			c.log.Debug("close stdin", "pid", c.id.PID, "err", err)
		}
		return c.stopCgroup(ctx, l)
	}
	x := newRun(c.log, c, Identity{}, c.tags)
	defer x.close()
	x.q.group, x.q.sid = c.id.PID, c.sid
	x.rescan() // before anything can exit and reparent its descendants
	if err := c.stdin.Close(); err != nil && !isClosed(err) {
		c.log.Debug("close stdin", "pid", c.id.PID, "err", err)
	}
	return x.ladder(ctx, l, true)
}

func (x *run) ladder(ctx context.Context, l Ladder, grace bool) Verdict {
	if grace && x.waitGone(ctx, l.Grace) || ctx.Err() != nil {
		return x.verdict()
	}
	x.signalAll(syscall.SIGTERM)
	if x.waitGone(ctx, l.TermTimeout) || ctx.Err() != nil {
		return x.verdict()
	}
	x.signalAll(syscall.SIGKILL)
	x.waitGone(ctx, l.KillTimeout)
	return x.verdict()
}
