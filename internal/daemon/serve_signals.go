package daemon

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// shutdownSignals are the signals that shut the daemon down: the one list
// both catchSignals and handleSignals use.
var shutdownSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// catchSignals catches shutdownSignals from serve's first instruction on:
// until handleSignals acts on them (once the daemon can shut down: after a
// live upgrade's new image adopted its sessions) they wait in the
// returned channel instead of killing the process by their default action
// (a new image killed so would leave its adopted children running until
// their stdin EOF and its caller unanswered). stop stops catching.
func catchSignals() (sigs chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 4)
	signal.Notify(sigs, shutdownSignals...)
	return sigs, func() { signal.Stop(sigs) }
}

// handleSignals: the first shutdown signal (caught since catchSignals,
// d.sigs) cancels ctx (the daemon shuts down through the eviction steps).
// Once shutting down (ctx cancelled by a signal or by beginShutdown), a
// further signal is answered with a log line, never a half-done exit.
// stop ends the watcher goroutine.
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
