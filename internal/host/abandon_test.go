package host

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
)

// TestAttachAbandon: a subscription abandoned (its attach's reply never
// went out) leaves nothing: no subscriber, no legacy hold, its slot on
// the connection free again; a second Abandon, or one after ConnClosed,
// does nothing.
func TestAttachAbandon(t *testing.T) {
	f := newFixture(t)
	f.h.o.MaxSubsPerConn = 1
	ctx := context.Background()
	id := f.create("echo")
	res, sub, err := f.h.Attach(ctx, "c1", api.AttachParams{SessionID: id}, true)
	if err != nil {
		t.Fatal(err)
	}
	sub.Abandon()
	sub.Abandon()
	if si, _ := f.h.Get(ctx, id); len(si.Holders) != 0 || si.Subscribers != 0 || si.ReleaseAt == nil {
		t.Fatalf("abandoned attach left %+v", si)
	}
	wantKind(t, f.h.Detach(ctx, "c1", res.SubscriptionID), api.KindInvalidParams)
	_, sub, err = f.h.Attach(ctx, "c1", api.AttachParams{SessionID: id}, false) // the slot is free
	if err != nil {
		t.Fatal(err)
	}
	f.h.ConnClosed("c1")
	sub.Abandon()
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	if len(f.h.subs) != 0 || f.h.conns["c1"] != nil {
		t.Fatalf("subs %v, conn c1 %+v", f.h.subs, f.h.conns["c1"])
	}
}
