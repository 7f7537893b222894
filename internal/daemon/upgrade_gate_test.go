package daemon

import (
	"context"
	"errors"
	"testing"
)

// TestUpgradeGateShutdown: a shutdown that begins while an upgrade runs
// cancels the upgrade's context with errShuttingDown (what it waits on
// ends at once) and waits for it to end; an upgrade asked once a shutdown
// began is refused as shutting (cause shutting_down), one asked while
// another runs as in progress.
func TestUpgradeGateShutdown(t *testing.T) {
	var g upgradeGate
	uctx, ok, _ := g.startUpgrade(context.Background())
	if !ok {
		t.Fatal("the first upgrade did not start")
	}
	if _, ok, shutting := g.startUpgrade(context.Background()); ok || shutting {
		t.Fatalf("a second upgrade while one runs: ok %v shutting %v; want in progress", ok, shutting)
	}
	began := make(chan struct{})
	done := make(chan struct{})
	go func() {
		close(began)
		g.beginShutdown()
		close(done)
	}()
	<-began
	<-uctx.Done() // the shutdown aborts the running upgrade
	if !errors.Is(context.Cause(uctx), errShuttingDown) {
		t.Fatalf("the upgrade's context ended with %v, want errShuttingDown", context.Cause(uctx))
	}
	select {
	case <-done:
		t.Fatal("the shutdown did not wait for the upgrade to end")
	default:
	}
	if _, ok, shutting := g.startUpgrade(context.Background()); ok || !shutting {
		t.Fatalf("an upgrade during the shutdown: ok %v shutting %v; want shutting", ok, shutting)
	}
	g.endUpgrade()
	<-done
	if ran, _ := g.execLocked(func() error { t.Fatal("exec during a shutdown"); return nil }); ran {
		t.Fatal("exec ran once a shutdown began")
	}
}
