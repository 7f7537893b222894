package claude

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// TestLongRequestIDAnswerable: a control request_id longer than a client
// may send back (api.MaxIDBytes) becomes a short requestId, so the
// approval can be answered; the answer carries the CLI's own request_id.
func TestLongRequestIDAnswerable(t *testing.T) {
	f := newFake(t, nil)
	f.started(t)
	long := strings.Repeat("q", 2000) // the fake reads lines of at most 64 KiB
	f.send(t, map[string]any{"type": "control_request", "request_id": long, "request": map[string]any{
		"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": "x"}, "tool_use_id": "toolu_1"}})
	req := decodeData[event.ApprovalRequestedData](t, f.next(t, event.ApprovalRequested))
	if len(req.RequestID) > api.MaxIDBytes {
		t.Fatalf("requestId of %d bytes: a client cannot answer it (requestId is at most %d)", len(req.RequestID), api.MaxIDBytes)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.a.Respond(t.Context(), req.RequestID, provider.Answer{Decision: "approve"}) }()
	m := f.read(t) // the answer is written as it is read
	if resp := m["response"].(map[string]any); resp["request_id"] != long {
		t.Fatalf("answer %.80v, want it to carry the CLI's request_id", m)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
