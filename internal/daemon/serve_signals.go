package daemon

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// handleSignals: the first SIGINT/SIGTERM cancels ctx (the daemon shuts
// down through the eviction steps). Once shutting down (ctx cancelled by a
// signal or by beginShutdown), a further signal is answered with a log
// line, never a half-done exit. stop ends the watcher goroutine.
func (d *daemon) handleSignals() (ctx context.Context, beginShutdown, stop func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
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
