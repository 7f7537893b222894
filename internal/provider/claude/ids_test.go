package claude

import (
	"errors"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// A control_request whose request_id is a number is still a request: it
// is relayed (or refused) and answered with the same number.
func TestNumericRequestIDAnswered(t *testing.T) {
	f := newFake(t, func(o *provider.Options) { o.RequestIDPrefix = "f1-" })
	f.started(t)
	f.send(t, `{"type":"control_request","request_id":7,"request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"x"},"tool_use_id":"toolu_1"}}`)
	req := decodeData[event.ApprovalRequestedData](t, f.next(t, event.ApprovalRequested))
	if req.RequestID != "f1-7" || req.Kind != "command" {
		t.Fatalf("approval.requested %+v", req)
	}
	// The string "7" is another request: relayed apart, answered by its own id.
	f.send(t, `{"type":"control_request","request_id":"7","request":{"subtype":"can_use_tool","tool_name":"Write","input":{},"tool_use_id":"toolu_2"}}`)
	req2 := decodeData[event.ApprovalRequestedData](t, f.next(t, event.ApprovalRequested))
	if req2.RequestID == req.RequestID || req2.Kind != "fileChange" {
		t.Fatalf("second approval.requested %+v (first %+v)", req2, req)
	}
	if err := f.a.Respond(t.Context(), req.RequestID, provider.Answer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	if resp := f.read(t)["response"].(map[string]any); resp["request_id"] != float64(7) || resp["subtype"] != "success" {
		t.Fatalf("answer to 7: %v", resp)
	}
	if err := f.a.Respond(t.Context(), req2.RequestID, provider.Answer{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	if resp := f.read(t)["response"].(map[string]any); resp["request_id"] != "7" {
		t.Fatalf("answer to \"7\": %v", resp)
	}
	// An unserved subtype with a numeric id gets its error answer too.
	f.send(t, `{"type":"control_request","request_id":8,"request":{"subtype":"mcp_message"}}`)
	if resp := f.read(t)["response"].(map[string]any); resp["request_id"] != float64(8) || resp["subtype"] != "error" {
		t.Fatalf("answer to unserved 8: %v", resp)
	}
	// So does a request whose other fields have the wrong types.
	f.send(t, `{"type":"control_request","request_id":"r9","session_id":5,"request":{"subtype":"can_use_tool","tool_name":3,"input":"x"}}`)
	req3 := decodeData[event.ApprovalRequestedData](t, f.next(t, event.ApprovalRequested))
	if req3.RequestID != "f1-r9" || req3.Kind != "toolCall" {
		t.Fatalf("damaged approval.requested %+v", req3)
	}
	// An id that is neither string nor number cannot be answered: logged.
	f.send(t, `{"type":"control_request","request_id":{"x":1},"request":{"subtype":"can_use_tool"}}`)
	f.send(t, `{"type":"keep_alive"}`)
	waitLog(t, f, "kind=bad_request_id")
}

// A request reusing the request_id of one still open is refused with an
// error answer; the open one stays open in the journal and answerable.
func TestClaudeReusedOpenRequestIDRefused(t *testing.T) {
	f := newFake(t, nil)
	f.started(t)
	open := `{"type":"control_request","request_id":"req-1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"x"},"tool_use_id":"toolu_1"}}`
	f.send(t, open)
	req := decodeData[event.ApprovalRequestedData](t, f.next(t, event.ApprovalRequested))
	f.send(t, open)
	if resp := f.read(t)["response"].(map[string]any); resp["subtype"] != "error" || resp["request_id"] != "req-1" ||
		!strings.Contains(resp["error"].(string), "already open") {
		t.Fatalf("reused id answered %v", resp)
	}
	f.send(t, `{"type":"result","subtype":"success","usage":{}}`)
	for {
		d := <-f.evs
		if d.Type == event.ApprovalResolved {
			if r := decodeData[event.ApprovalResolvedData](t, d); r.Decision != "cancel" || r.Reason != "turn_ended" {
				t.Fatalf("the open approval was resolved by its duplicate: %+v", r)
			}
		}
		if d.Type == event.TurnCompleted {
			break
		}
	}
	if err := f.a.Respond(t.Context(), req.RequestID, provider.Answer{Decision: "approve"}); !errors.Is(err, provider.ErrRequestNotFound) {
		t.Fatalf("answer after the turn ended: %v", err)
	}
}

// A result whose fields have the wrong types still ends the turn, with
// what could be read.
func TestDamagedResultEndsTurn(t *testing.T) {
	f := newFake(t, nil)
	f.started(t)
	// An assistant message with one damaged block still opens its tool's item.
	f.send(t, `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}},{"type":5,"id":[]}]}}`)
	if it := decodeData[event.ItemData](t, f.next(t, event.ItemStarted)); it.ItemID != "toolu_1" || it.Kind != event.KindCommandExecution {
		t.Fatalf("item.started %+v", it)
	}
	f.send(t, `{"type":"result","subtype":"success","is_error":"no","total_cost_usd":"lots","errors":"boom","usage":{"input_tokens":"many","output_tokens":5}}`)
	u := decodeData[event.TurnUsageData](t, f.next(t, event.TurnUsage))
	if u.OutputTokens != 5 || u.InputTokens != 0 || u.CostUSD != nil {
		t.Fatalf("turn.usage %+v", u)
	}
	if tc := decodeData[event.TurnCompletedData](t, f.next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v", tc)
	}
	waitLog(t, f, "kind=bad_field")
	// A result whose subtype cannot be read ends the turn failed.
	if err := f.a.StartTurn(t.Context(), "t_2", "again"); err != nil {
		t.Fatal(err)
	}
	f.read(t)
	f.send(t, `{"type":"result","subtype":{"x":1},"usage":[],"total_cost_usd":null}`)
	if u := decodeData[event.TurnUsageData](t, f.next(t, event.TurnUsage)); u.CostUSD != nil {
		t.Fatalf("a null cost journaled as %v", *u.CostUSD)
	}
	if tc := decodeData[event.TurnCompletedData](t, f.next(t, event.TurnCompleted)); tc.Status != event.StatusFailed || tc.Reason != event.ReasonProviderError {
		t.Fatalf("second turn.completed %+v", tc)
	}
}

// waitLog waits until the adapter's log holds s (the adapter logs from
// its reader goroutine; f.evs or a later line orders it).
func waitLog(t *testing.T, f *fake, s string) {
	t.Helper()
	// A line after the one that logs is handled after it: a notice of an
	// unknown type marks the point.
	f.send(t, `{"type":"probe_marker_`+strings.NewReplacer("=", "_", " ", "_").Replace(s)+`"}`)
	f.next(t, event.ProviderNotice)
	if !strings.Contains(f.log(), s) {
		t.Fatalf("log lacks %q:\n%s", s, f.log())
	}
}

// A numeric request withdrawn by the CLI (control_cancel_request with the
// same number) is resolved as withdrawn; a cancel naming the string "12"
// withdraws nothing of the number 12.
func TestNumericRequestIDWithdrawn(t *testing.T) {
	f := newFake(t, func(o *provider.Options) { o.RequestIDPrefix = "f1-" })
	f.started(t)
	f.send(t, `{"type":"control_request","request_id":12,"request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"x"},"tool_use_id":"toolu_1"}}`)
	req := decodeData[event.ApprovalRequestedData](t, f.next(t, event.ApprovalRequested))
	if req.RequestID != "f1-12" {
		t.Fatalf("approval.requested %+v", req)
	}
	f.send(t, `{"type":"control_cancel_request","request_id":"12"}`)
	f.send(t, `{"type":"control_cancel_request","request_id":12}`)
	got := decodeData[event.ApprovalResolvedData](t, f.next(t, event.ApprovalResolved))
	if got.RequestID != "f1-12" || got.Decision != "cancel" || got.By != "provider" || got.Reason != "withdrawn" {
		t.Fatalf("approval.resolved %+v", got)
	}
	if err := f.a.Respond(t.Context(), req.RequestID, provider.Answer{Decision: "approve"}); !errors.Is(err, provider.ErrRequestNotFound) {
		t.Fatalf("answer after the withdrawal: %v", err)
	}
}
