package host

import (
	"context"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/proc"
)

// A crashed child whose first teardown failed is retried although its turn
// is still open and a surface still holds the session: the retry is what
// closes that turn, so "busy" must not defer it.
func TestCrashTeardownRetriedDespiteOpenTurnAndHold(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	e := f.h.lookup(id)
	real := f.h.stopChild
	e.mu.Lock()
	f.h.stopChild = func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict {
		return proc.Verdict{Root: proc.Unverifiable, Tree: proc.Unverifiable}
	}
	e.mu.Unlock()
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/crash"}); err != nil {
		t.Fatal(err)
	}
	// Wait for the watcher's failed attempt: it arms the retry.
	for deadline := time.Now().Add(20 * time.Second); ; {
		si, _ := f.h.Get(ctx, id)
		if si.ReleaseAt != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no retry armed after the failed teardown of a crashed child")
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.mu.Lock()
	f.h.stopChild = real
	e.mu.Unlock()
	// Both the child's exit and its reader's end can make a failed
	// attempt (each doubles the retry's delay, 1 s, 2 s, …): advance past
	// the longest.
	f.clk.Advance(time.Minute)
	// The retry may still be running its last step (forget) when Advance
	// returns: wait for the entry to leave the map, bounded.
	for deadline := time.Now().Add(20 * time.Second); f.h.lookup(id) != nil; {
		if time.Now().After(deadline) {
			t.Fatal("crashed child's teardown not retried")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.tail(id, event.TurnCompleted, event.ProviderExited, event.SessionEnded, event.LeaseReleased)
	ended := f.waitFor(id, 0, isType(event.SessionEnded))
	if data(ended)["reason"] != event.ReasonProviderExited {
		t.Fatalf("retry journaled %s, want provider_exited", ended.Data)
	}
}

// A release pipelined behind a hold that is still starting the child waits
// for it and then drops the hold (it must not overtake it).
func TestReleaseQueuesBehindStartingHold(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("slowstart")
	held := make(chan error, 1)
	go func() {
		_, err := f.h.Hold(ctx, "c1", api.HoldParams{SessionID: id, HolderID: "w1"})
		held <- err
	}()
	for f.h.lookup(id) == nil { // the hold has inserted its entry and is starting
		time.Sleep(time.Millisecond)
	}
	rr, err := f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "w1"})
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err != nil || !rr.Released || rr.ReleaseAt == nil {
		t.Fatalf("pipelined release %+v %v", rr, err)
	}
	f.clk.Advance(idle)
	if f.h.lookup(id) != nil {
		t.Fatal("session not evicted after the pipelined release")
	}
}

// Options left zero take config's defaults: host restates none of them.
func TestZeroOptionsTakeConfigDefaults(t *testing.T) {
	f := newFixture(t)
	h, err := New(Options{Store: f.st, Journal: f.j})
	if err != nil {
		t.Fatal(err)
	}
	d := config.Default()
	o := h.o
	want := proc.Ladder{Grace: d.Ladder.Grace, TermTimeout: d.Ladder.TermTimeout, KillTimeout: d.Ladder.KillTimeout}
	if o.IdleTimeout != d.IdleTimeout || o.StartTimeout != d.StartTimeout || o.StepTimeout != d.StepTimeout ||
		o.Ladder != want || o.MaxHoldsPerConn != config.DefaultMaxHoldsPerConn || o.MaxSubsPerConn != config.DefaultMaxSubsPerConn {
		t.Fatalf("zero options became %+v, want config's defaults", o)
	}
}
