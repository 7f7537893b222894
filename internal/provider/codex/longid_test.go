package codex

import (
	"context"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestLongProviderRequestIDAnswerable: a provider request id longer than
// a client may send back (api.MaxIDBytes) becomes a short requestId (a
// digest of it), so the approval can be answered; the answer carries the
// provider's own id, and its serverRequest/resolved finds it.
func TestLongProviderRequestIDAnswerable(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	long := strings.Repeat("r", 100_000)
	f.send(t, map[string]any{"jsonrpc": "2.0", "id": long, "method": "item/commandExecution/requestApproval",
		"params": map[string]any{"threadId": "thr_1", "turnId": "pt", "itemId": "c1"}})
	req := decode[event.ApprovalRequestedData](t, f.rec.waitFor(t, event.ApprovalRequested, "t_1"))
	if len(req.RequestID) > api.MaxIDBytes {
		t.Fatalf("requestId of %d bytes: a client cannot answer it (requestId is at most %d)", len(req.RequestID), api.MaxIDBytes)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.a.Respond(context.Background(), req.RequestID, decide(true)) }()
	if ans := f.expect(t, ""); ans["id"] != long {
		t.Fatalf("answer %.80v, want it to carry the provider's id", ans)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// A second one, withdrawn by the provider: resolved under the same short id.
	f.send(t, map[string]any{"id": long + "2", "method": "item/commandExecution/requestApproval", "params": map[string]any{"turnId": "pt"}})
	req2 := decode[event.ApprovalRequestedData](t, f.rec.waitForNth(t, event.ApprovalRequested, "t_1", 2))
	f.send(t, map[string]any{"method": "serverRequest/resolved", "params": map[string]any{"threadId": "thr_1", "requestId": long + "2"}})
	res := decode[event.ApprovalResolvedData](t, f.rec.waitForNth(t, event.ApprovalResolved, "t_1", 2))
	if res.RequestID != req2.RequestID || len(req2.RequestID) > api.MaxIDBytes || req2.RequestID == req.RequestID {
		t.Fatalf("withdrawn request resolved as %q, requested as %q (first %q)", res.RequestID, req2.RequestID, req.RequestID)
	}
}
