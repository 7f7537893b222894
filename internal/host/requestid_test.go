package host

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestRequestIDsUniquePerChild: a provider numbers its requests afresh in
// every process, so a newer child's first approval reuses the number of
// the old child's. The requestIds clients see differ, and an answer meant
// for the old (cancelled) request never approves the new one.
func TestRequestIDsUniquePerChild(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	approval := func(after uint64) (string, uint64) {
		ev := f.waitFor(id, after, isType(event.ApprovalRequested))
		var d struct {
			RequestID string `json:"requestId"`
		}
		json.Unmarshal(ev.Data, &d)
		return d.RequestID, ev.Seq
	}
	f.hold(id, "h", "c1")
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/approve"}); err != nil {
		t.Fatal(err)
	}
	old, seq := approval(0)
	if _, err := f.h.Close(ctx, id); err != nil {
		t.Fatal(err)
	}
	f.hold(id, "h", "c1")
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/approve"}); err != nil {
		t.Fatal(err)
	}
	cur, _ := approval(seq)
	if cur == old {
		t.Fatalf("the new child's approval has the old one's requestId %q", cur)
	}
	err := f.h.Respond(ctx, api.RespondParams{SessionID: id, RequestID: old, Decision: "approve"})
	wantKind(t, err, api.KindRequestNotFound)
	if err := f.h.Respond(ctx, api.RespondParams{SessionID: id, RequestID: cur, Decision: "approve"}); err != nil {
		t.Fatalf("answer to the current approval: %v", err)
	}
}
