package codex

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// JSON-RPC ids of different types are different ids: a number 9 and a
// string "9" open at once are two approvals, each answered with its own id.
func TestRequestIDsOfDifferentTypesAreDistinct(t *testing.T) {
	f := newFake(t, func(o *Options) { o.RequestIDPrefix = "f1-" })
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	f.send(t, map[string]any{"id": 9, "method": "item/commandExecution/requestApproval", "params": map[string]any{"turnId": "pt", "itemId": "a"}})
	f.send(t, map[string]any{"id": "9", "method": "item/fileChange/requestApproval", "params": map[string]any{"turnId": "pt", "itemId": "b"}})
	first := decode[event.ApprovalRequestedData](t, f.rec.waitForNth(t, event.ApprovalRequested, "t_1", 1))
	second := decode[event.ApprovalRequestedData](t, f.rec.waitForNth(t, event.ApprovalRequested, "t_1", 2))
	if first.RequestID == second.RequestID {
		t.Fatalf("9 and \"9\" share the requestId %q", first.RequestID)
	}
	if first.RequestID != "f1-9" || first.Kind != "command" || second.Kind != "fileChange" {
		t.Fatalf("approvals %+v, %+v", first, second)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.a.Respond(context.Background(), second.RequestID, decide(false)) }()
	if ans := f.expect(t, ""); ans["id"] != "9" {
		t.Fatalf("answer to \"9\" went to id %#v", ans["id"])
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	go func() { errc <- f.a.Respond(context.Background(), first.RequestID, decide(true)) }()
	if ans := f.expect(t, ""); ans["id"] != float64(9) {
		t.Fatalf("answer to 9 went to id %#v", ans["id"])
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// serverRequest/resolved names ids by type too: the string one is gone.
	f.send(t, map[string]any{"method": "serverRequest/resolved", "params": map[string]any{"threadId": "thr_1", "requestId": "9"}})
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"turn": map[string]any{"id": "pt", "status": "completed"}}})
	f.rec.waitFor(t, event.TurnCompleted, "t_1")
	if got := typesOf(f.rec.all()); got != "approval.requested,approval.requested,approval.resolved,approval.resolved,turn.completed" {
		t.Fatalf("events %s", got)
	}
}

// A provider that reuses the id of a request still open gets an error
// response for the second one (logged once); the first stays open,
// answerable, and is answered with its own id.
func TestReusedOpenRequestIDRefused(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	f.send(t, map[string]any{"id": 4, "method": "item/commandExecution/requestApproval", "params": map[string]any{"turnId": "pt", "itemId": "a"}})
	req := decode[event.ApprovalRequestedData](t, f.rec.waitFor(t, event.ApprovalRequested, "t_1"))
	for range 2 {
		f.send(t, map[string]any{"id": 4, "method": "item/fileChange/requestApproval", "params": map[string]any{"turnId": "pt", "itemId": "b"}})
		ans := f.expect(t, "")
		e, _ := ans["error"].(map[string]any)
		if ans["id"] != float64(4) || e == nil || !strings.Contains(e["message"].(string), "already open") {
			t.Fatalf("reused id answered %v", ans)
		}
	}
	// The same id on a request that is refused anyway is refused, and
	// does not close the open approval in the journal either.
	f.send(t, map[string]any{"id": 4, "method": "item/tool/call", "params": map[string]any{"turnId": "pt"}})
	if ans := f.expect(t, ""); ans["error"] == nil {
		t.Fatalf("reused id on a refused request answered %v", ans)
	}
	if n := strings.Count(f.logs.String(), "level=WARN msg=\"provider protocol anomaly\" kind=duplicate_request_id"); n != 1 {
		t.Fatalf("duplicate logged at warn %d times:\n%s", n, f.logs.String())
	}
	for _, d := range f.rec.all() {
		if d.Type == event.ApprovalResolved || d.Type == event.ApprovalRequested && decode[event.ApprovalRequestedData](t, d).Kind != "command" {
			t.Fatalf("the reused id reached the journal as %s %s", d.Type, d.Data)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- f.a.Respond(context.Background(), req.RequestID, decide(true)) }()
	if ans := f.expect(t, ""); ans["id"] != float64(4) || ans["result"].(map[string]any)["decision"] != "accept" {
		t.Fatalf("answer %v", ans)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := f.a.Respond(context.Background(), req.RequestID, decide(true)); !errors.Is(err, ErrRequestNotFound) {
		t.Fatalf("second answer: %v", err)
	}
}
