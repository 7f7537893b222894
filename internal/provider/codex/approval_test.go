package codex

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

func TestFileChangeApprovalWithStringID(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	f.send(t, map[string]any{"jsonrpc": "2.0", "id": "req-7", "method": "item/fileChange/requestApproval",
		"params": map[string]any{"threadId": "thr_1", "turnId": "pt", "itemId": "fc", "reason": "write"}})
	req := decode[event.ApprovalRequestedData](t, f.rec.waitFor(t, event.ApprovalRequested, "t_1"))
	if req.RequestID != "req-7" || req.Kind != "fileChange" {
		t.Fatalf("approval.requested %+v", req)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.a.Respond(context.Background(), "req-7", decide(false)) }()
	ans := f.expect(t, "")
	if ans["id"] != "req-7" || ans["result"].(map[string]any)["decision"] != "decline" {
		t.Fatalf("answer %v", ans)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	res := decode[event.ApprovalResolvedData](t, f.rec.waitFor(t, event.ApprovalResolved, "t_1"))
	if res.Decision != "deny" || res.RequestID != "req-7" {
		t.Fatalf("approval.resolved %+v", res)
	}
	// A numeric request id is answered with a number, and named by its text.
	f.send(t, map[string]any{"id": 12, "method": "item/commandExecution/requestApproval", "params": map[string]any{"turnId": "pt"}})
	if req := decode[event.ApprovalRequestedData](t, f.rec.waitForNth(t, event.ApprovalRequested, "t_1", 2)); req.RequestID != "12" {
		t.Fatalf("second approval.requested %+v", req)
	}
	go func() { errc <- f.a.Respond(context.Background(), "12", decide(true)) }()
	if ans := f.expect(t, ""); ans["id"] != float64(12) || ans["result"].(map[string]any)["decision"] != "accept" {
		t.Fatalf("answer %v", ans)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestApprovalOutsideTurnKeepsBusy(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	if f.a.Busy() {
		t.Fatal("busy while idle")
	}
	f.send(t, map[string]any{"id": 5, "method": "item/commandExecution/requestApproval", "params": map[string]any{"threadId": "thr_1"}})
	f.rec.waitFor(t, event.ApprovalRequested, "")
	if !f.a.Busy() {
		t.Fatal("an unanswered approval must keep the adapter busy")
	}
	errc := make(chan error, 1)
	go func() { errc <- f.a.Respond(context.Background(), "5", decide(true)) }()
	f.expect(t, "")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if f.a.Busy() {
		t.Fatal("busy after the approval was answered")
	}
}

// hookWriter runs hook after each write to the provider's stdin.
type hookWriter struct {
	io.WriteCloser
	hook func([]byte)
}

func (h hookWriter) Write(p []byte) (int, error) {
	n, err := h.WriteCloser.Write(p)
	h.hook(p)
	return n, err
}

func TestApprovalResolvedPrecedesProviderReaction(t *testing.T) {
	var f *fake
	hook := func(p []byte) {
		if !strings.Contains(string(p), `"decision"`) {
			return
		}
		// The provider reacts to the answer at once, before Respond returns.
		f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"turn": map[string]any{"id": "pt", "status": "completed"}}})
		// A correct adapter cannot emit it yet; give a wrong one the chance
		// (waiting for an event that must not come: a bounded wait).
		select {
		case <-f.a.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	f = newFake(t, func(o *Options) { o.In = hookWriter{o.In, hook} })
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	f.send(t, map[string]any{"id": 1, "method": "item/commandExecution/requestApproval", "params": map[string]any{"turnId": "pt"}})
	f.rec.waitFor(t, event.ApprovalRequested, "t_1")
	errc := make(chan error, 1)
	go func() { errc <- f.a.Respond(context.Background(), "1", decide(true)) }()
	f.expect(t, "")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	f.rec.waitFor(t, event.TurnCompleted, "t_1")
	if got := typesOf(f.rec.all()); got != "approval.requested,approval.resolved,turn.completed" {
		t.Fatalf("event order %s", got)
	}
}
