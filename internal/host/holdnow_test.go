package host

import (
	"context"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
)

// TestHoldNowOnlyWhenItNeedNotWait: HoldNow answers a hold of a live
// session whose lock is free as Hold would (the holder is counted, the
// release clock disarmed), and declines (ok false, nothing changed) a
// session that is not live (stored: its child would have to start) or
// whose lock another call holds; ReleaseNow answers a release of a
// session without an entry, and declines one whose lock is held.
func TestHoldNowOnlyWhenItNeedNotWait(t *testing.T) {
	f := newFixture(t)
	id := f.create("echo")
	if _, ok, err := f.h.HoldNow("c1", api.HoldParams{SessionID: id, HolderID: "a"}); ok || err != nil {
		t.Fatalf("HoldNow of a stored session: ok %v, err %v; want declined (its child must start)", ok, err)
	}
	if rr, ok, err := f.h.ReleaseNow("c1", api.ReleaseParams{SessionID: id, HolderID: "a"}); !ok || err != nil || rr.Released {
		t.Fatalf("ReleaseNow of a session without an entry: %+v ok %v err %v", rr, ok, err)
	}
	f.hold(id, "owner", "c0")
	res, ok, err := f.h.HoldNow("c1", api.HoldParams{SessionID: id, HolderID: "a"})
	if !ok || err != nil || res.State != "live" || res.HoldToken == "" || len(res.Holders) != 2 {
		t.Fatalf("HoldNow of a live session: %+v ok %v err %v", res, ok, err)
	}
	e := f.h.lookup(id)
	e.mu.Lock() // another call holds the session lock
	_, okHold, _ := f.h.HoldNow("c1", api.HoldParams{SessionID: id, HolderID: "b"})
	_, okRel, _ := f.h.ReleaseNow("c1", api.ReleaseParams{SessionID: id, HolderID: "a"})
	e.mu.Unlock()
	if okHold || okRel {
		t.Fatalf("behind a held session lock: HoldNow ok %v, ReleaseNow ok %v; want both declined", okHold, okRel)
	}
	rr, ok, err := f.h.ReleaseNow("c1", api.ReleaseParams{SessionID: id, HolderID: "a", HoldToken: res.HoldToken})
	if !ok || err != nil || !rr.Released || len(rr.Holders) != 1 {
		t.Fatalf("ReleaseNow: %+v ok %v err %v", rr, ok, err)
	}
	if _, ok, err := f.h.HoldNow("c1", api.HoldParams{SessionID: "s_nonexistent00", HolderID: "a"}); !ok {
		t.Fatalf("HoldNow of an unknown session: ok %v err %v; want answered not found", ok, err)
	} else {
		wantKind(t, err, api.KindSessionNotFound)
	}
	if _, err := f.h.Close(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}
