package daemon

import (
	"context"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
)

// Signals the daemon answers. A signal whose default action terminates
// the process must never kill it without its teardown (the providers'
// descendants would outlive it): each one an operator may plausibly send
// is either a shutdown or ignored with a log line.
var (
	// shutdownSignals shut the daemon down through the eviction steps.
	// SIGHUP is a terminal's hangup (`make run` in a closed terminal): the
	// daemon's controlling terminal is gone, so it stops as on SIGTERM.
	// It is neither an upgrade (that is daemon.upgrade) nor a reload.
	shutdownSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}
	// ignoredSignals are logged and otherwise ignored.
	ignoredSignals = []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2}
	// SIGPIPE is caught and dropped, not logged: a write to a stderr whose
	// reader is gone (`serve 2>&1 | tee` in a closed terminal) then fails
	// with EPIPE instead of killing the daemon mid-teardown (Go's default
	// for fds 1 and 2). Caught, not ignored: children get the default.
)

// caughtSignals is every signal catchSignals takes.
func caughtSignals() []os.Signal {
	return slices.Concat(shutdownSignals, ignoredSignals, []os.Signal{syscall.SIGPIPE})
}

// catchSignals catches the daemon's signals from serve's first
// instruction on: until handleSignals acts on them (once the daemon can
// shut down: after a live upgrade's new image adopted its sessions) they
// wait in the returned channel instead of killing the process by their
// default action (a new image killed so would leave its adopted children
// running until their stdin EOF and its caller unanswered). stop stops
// catching.
func catchSignals() (sigs chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 4)
	signal.Notify(sigs, caughtSignals()...)
	return sigs, func() { signal.Stop(sigs) }
}

// handleSignals: the first shutdown signal (caught since catchSignals,
// d.sigs) cancels ctx (the daemon shuts down through the eviction steps).
// Once shutting down (ctx cancelled by a signal or by beginShutdown), a
// further signal is answered with a log line, never a half-done exit. An
// ignored signal is a log line only. stop ends the watcher goroutine.
func (d *daemon) handleSignals() (ctx context.Context, beginShutdown, stop func()) {
	sigs := d.sigs
	if sigs == nil {
		sigs, _ = catchSignals()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				if s == syscall.SIGPIPE {
					continue // logging it would write to the broken pipe again
				}
				if slices.Contains(ignoredSignals, s) {
					d.log.Warn("signal ignored: it means nothing to sessiond (SIGTERM, SIGINT or SIGHUP shut it down)",
						"signal", s.String())
					continue
				}
				if ctx.Err() == nil {
					d.log.Info("signal received, shutting down", "signal", s.String())
					d.phase.markShutdown() // a live upgrade not yet exec'd aborts
					cancel()
					continue
				}
				d.log.Warn("signal received while shutting down: the evictions continue (the next start reaps whatever a SIGKILL leaves)",
					"signal", s.String())
			}
		}
	}()
	var once sync.Once
	return ctx, cancel, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			<-exited
			cancel()
		})
	}
}
