package daemon

import (
	"context"
	"sync"
)

// upgradeGate makes a live upgrade and a shutdown mutually exclusive. A
// shutdown that begins (a signal, daemon.shutdown) while an upgrade runs
// aborts it before the exec (the caller gets upgrade_refused) and waits
// for it to have undone its quiesce; an upgrade does not start once a
// shutdown began. The exec itself happens under the gate's lock, after a
// last look: a shutdown requested from then on is the new image's (only
// a signal that reaches the runtime in the instant between that look and
// the exec is lost with the old image). A shutdown also cancels the
// running upgrade's context (cause errShuttingDown): whatever it waits on
// (the new binary's check, whose process group is then killed, the calls
// in flight, the quiesce) ends at once.
type upgradeGate struct {
	mu        sync.Mutex
	shutting  bool
	upgrading bool
	idle      chan struct{}           // closed when the running upgrade ends
	abort     context.CancelCauseFunc // the running upgrade's context
}

// markShutdown records that a shutdown began and aborts a running upgrade.
func (g *upgradeGate) markShutdown() {
	g.mu.Lock()
	g.shutting = true
	if g.abort != nil {
		g.abort(errShuttingDown)
	}
	g.mu.Unlock()
}

// startUpgrade is false once a shutdown began or another upgrade runs;
// else uctx is ctx, cancelled when a shutdown begins.
func (g *upgradeGate) startUpgrade(ctx context.Context) (uctx context.Context, ok bool, shutting bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shutting || g.upgrading {
		return ctx, false, g.shutting
	}
	g.upgrading, g.idle = true, make(chan struct{})
	uctx, g.abort = context.WithCancelCause(ctx)
	return uctx, true, false
}

// endUpgrade: the upgrade did not happen and is undone.
func (g *upgradeGate) endUpgrade() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.upgrading = false
	g.abort(context.Canceled)
	g.abort = nil
	close(g.idle)
}

// shuttingDown says whether a shutdown began.
func (g *upgradeGate) shuttingDown() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shutting
}

// execLocked runs exec under the lock unless a shutdown began (then
// false, exec not run); a failed exec returns true with its error.
func (g *upgradeGate) execLocked(exec func() error) (ran bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shutting {
		return false, nil
	}
	return true, exec()
}

// beginShutdown marks the shutdown and waits for a running upgrade to
// have aborted.
func (g *upgradeGate) beginShutdown() {
	g.mu.Lock()
	g.shutting = true
	if g.abort != nil {
		g.abort(errShuttingDown)
	}
	idle := g.idle
	upgrading := g.upgrading
	g.mu.Unlock()
	if upgrading {
		<-idle
	}
}
