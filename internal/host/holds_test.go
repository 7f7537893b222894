package host

import (
	"context"
	"github.com/sessiond/sessiond/internal/proc"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

func TestReleaseClockRearmsDuringTurnAndApproval(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/approve"}); err != nil {
		t.Fatal(err)
	}
	req := f.waitFor(id, 0, isType(event.ApprovalRequested))
	if _, err := f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "h"}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(idle)
	if f.h.lookup(id) == nil {
		t.Fatal("evicted while an approval was pending")
	}
	si, _ := f.h.Get(ctx, id)
	if si.ReleaseAt == nil || !si.ReleaseAt.After(f.clk.Now()) {
		t.Fatalf("release clock not re-armed: %+v", si.ReleaseAt)
	}
	reqID, _ := data(req)["requestId"].(string)
	if err := f.h.Respond(ctx, api.RespondParams{SessionID: id, RequestID: reqID, Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	last := f.waitFor(id, 0, isType(event.TurnCompleted)).Seq

	// A long turn re-arms too.
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/sleep 60000"}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(idle)
	if f.h.lookup(id) == nil {
		t.Fatal("evicted during a running turn")
	}
	if c, err := f.h.Cancel(ctx, id); err != nil || !c.Cancelled {
		t.Fatalf("cancel %+v %v", c, err)
	}
	tc := f.waitFor(id, last, isType(event.TurnCompleted))
	if data(tc)["status"] != "interrupted" {
		t.Fatalf("cancelled turn %s", tc.Data)
	}
	f.clk.Advance(idle)
	if f.h.lookup(id) != nil {
		t.Fatal("idle session not evicted once the turn ended")
	}
}

func TestTTLExpiryAndDisconnectBackstop(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	ttl := int64(1000)
	if _, err := f.h.Hold(ctx, "c1", api.HoldParams{SessionID: id, HolderID: "ttl", TTLMs: &ttl}); err != nil {
		t.Fatal(err)
	}
	f.hold(id, "relay", "c1")
	f.hold(id, "relay", "c2") // re-homed to c2
	f.clk.Advance(time.Second)
	if si, _ := f.h.Get(ctx, id); len(si.Holders) != 1 || si.Holders[0] != "relay" {
		t.Fatalf("holders after ttl %v", si.Holders)
	}
	f.h.ConnClosed("c1") // the older connection: hold stays
	if si, _ := f.h.Get(ctx, id); len(si.Holders) != 1 || si.ReleaseAt != nil {
		t.Fatalf("older connection dropped a re-homed hold: %+v", si)
	}
	f.h.ConnClosed("c2")
	si, _ := f.h.Get(ctx, id)
	if len(si.Holders) != 0 || si.ReleaseAt == nil {
		t.Fatalf("backstop did not drop the hold: %+v", si)
	}
	f.clk.Advance(idle)
	if f.h.lookup(id) != nil {
		t.Fatal("not evicted after the backstop")
	}
}

func TestHoldTokenGuardsStaleRelease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	old := f.hold(id, "relay", "c1")
	f.hold(id, "relay", "c2")
	rr, err := f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "relay", HoldToken: old.HoldToken})
	if err != nil || rr.Released || len(rr.Holders) != 1 {
		t.Fatalf("stale-token release %+v %v", rr, err)
	}
	rr, err = f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "nobody"})
	if err != nil || rr.Released {
		t.Fatalf("unknown holder %+v %v", rr, err)
	}
	// A hold cancels the release clock.
	f.h.Release(ctx, "c2", api.ReleaseParams{SessionID: id, HolderID: "relay"})
	f.hold(id, "again", "c2")
	f.clk.Advance(idle)
	if f.h.lookup(id) == nil {
		t.Fatal("evicted although re-held")
	}
}

func TestSendDeduplication(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	_, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "x"})
	wantKind(t, err, api.KindSessionNotLive)
	f.hold(id, "h", "c1")
	a, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/sleep 60000", ClientMessageID: "m1"})
	if err != nil || a.Duplicate {
		t.Fatalf("first send %+v %v", a, err)
	}
	b, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/sleep 60000", ClientMessageID: "m1"})
	if err != nil || !b.Duplicate || b.TurnID != a.TurnID {
		t.Fatalf("retried send %+v %v", b, err)
	}
	_, err = f.h.Send(ctx, api.SendParams{SessionID: id, Text: "other", ClientMessageID: "m2"})
	wantKind(t, err, api.KindTurnRunning)
	if _, err := f.h.Close(ctx, id); err != nil {
		t.Fatal(err)
	}
	c, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "again", ClientMessageID: "m1"})
	if err != nil || !c.Duplicate || c.TurnID != a.TurnID {
		t.Fatalf("send after close %+v %v", c, err)
	}
	n := 0
	for _, typ := range f.types(id) {
		if typ == event.TurnStarted {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d turn.started rows, want 1", n)
	}
}

func TestLegacySubscriptionIsAHold(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	res, _, err := f.h.Attach(ctx, "c1", api.AttachParams{SessionID: id}, false)
	if err != nil || f.h.lookup(id) != nil {
		t.Fatalf("structured attach started a child (err %v)", err)
	}
	f.h.Detach(ctx, "c1", res.SubscriptionID)
	res, sub, err := f.h.Attach(ctx, "c1", api.AttachParams{SessionID: id}, true)
	if err != nil || f.h.lookup(id) == nil {
		t.Fatalf("legacy attach did not start the child (err %v)", err)
	}
	if si, _ := f.h.Get(ctx, id); len(si.Holders) != 1 || si.Subscribers != 1 {
		t.Fatalf("legacy attach %+v", si)
	}
	_ = sub
	if err := f.h.Detach(ctx, "c1", res.SubscriptionID); err != nil {
		t.Fatal(err)
	}
	if si, _ := f.h.Get(ctx, id); len(si.Holders) != 0 || si.ReleaseAt == nil {
		t.Fatalf("detach did not end the legacy hold: %+v", si)
	}
	f.clk.Advance(idle)
	if f.h.lookup(id) != nil {
		t.Fatal("not evicted after legacy detach")
	}
}

func TestPerConnectionLimits(t *testing.T) {
	f := newFixture(t)
	f.h.o.MaxHoldsPerConn, f.h.o.MaxSubsPerConn = 1, 1
	ctx := context.Background()
	a, b := f.create("echo"), f.create("echo")
	f.hold(a, "h", "c1")
	_, err := f.h.Hold(ctx, "c1", api.HoldParams{SessionID: b, HolderID: "h"})
	wantKind(t, err, api.KindLimitExceeded)
	f.hold(b, "h", "c2") // another connection has its own budget
	if _, _, err := f.h.Attach(ctx, "c1", api.AttachParams{SessionID: a}, false); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.h.Attach(ctx, "c1", api.AttachParams{SessionID: b}, false)
	wantKind(t, err, api.KindLimitExceeded)
	f.h.ConnClosed("c1")
	f.h.ConnClosed("c2")
}

// A failed eviction from the release clock is retried with backoff, never
// dropped; the retry succeeds once the child can be proven gone.
func TestFailedIdleEvictionIsRetried(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	real := f.h.stopChild
	f.h.stopChild = func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict {
		return proc.Verdict{Root: proc.Unverifiable, Tree: proc.Unverifiable}
	}
	f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "h"})
	f.clk.Advance(idle)
	si, _ := f.h.Get(ctx, id)
	if f.h.lookup(id) == nil || si.ReleaseAt == nil {
		t.Fatalf("failed eviction dropped or not re-armed: %+v", si)
	}
	f.clk.Advance(time.Second) // first retry fails again: backoff doubles
	si, _ = f.h.Get(ctx, id)
	if si.ReleaseAt == nil || si.ReleaseAt.Sub(f.clk.Now()) != 2*time.Second {
		t.Fatalf("second retry not at +2s: %+v", si.ReleaseAt)
	}
	e := f.h.lookup(id)
	e.mu.Lock()
	f.h.stopChild = real
	e.mu.Unlock()
	f.clk.Advance(2 * time.Second)
	if f.h.lookup(id) != nil {
		t.Fatal("retried eviction did not succeed")
	}
}
