package claude

import (
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// One turn with the message types a real turn has: the tool_use blocks of
// an assistant message open items of their tool's kind (a subagent's
// child carries parentItemId), tool_result blocks complete them with their
// output, TodoWrite is turn.plan, and the result is turn.usage then
// turn.completed.
func TestTurnItems(t *testing.T) {
	f := newFake(t, nil)
	f.started(t)
	f.send(t, map[string]any{"type": "assistant", "message": map[string]any{"id": "msg_1", "content": []any{
		map[string]any{"type": "tool_use", "id": "tu_bash", "name": "Bash", "input": map[string]any{"command": "ls"}},
		map[string]any{"type": "tool_use", "id": "tu_edit", "name": "Edit", "input": map[string]any{"file_path": "/w/a.go"}},
		map[string]any{"type": "tool_use", "id": "tu_todo", "name": "TodoWrite", "input": map[string]any{"todos": []any{
			map[string]any{"content": "read", "status": "completed"}, map[string]any{"content": "write", "status": "in_progress"}}}},
	}}})
	f.send(t, map[string]any{"type": "assistant", "parent_tool_use_id": "tu_task", "message": map[string]any{"id": "msg_2", "content": []any{
		map[string]any{"type": "tool_use", "id": "tu_mcp", "name": "mcp__files__read", "input": map[string]any{"p": 1}}}}})
	f.send(t, map[string]any{"type": "user", "message": map[string]any{"content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": "tu_bash", "content": "a\nb\n"},
		map[string]any{"type": "tool_result", "tool_use_id": "tu_edit", "content": []any{map[string]any{"type": "text", "text": "no such file"}}, "is_error": true},
		map[string]any{"type": "tool_result", "tool_use_id": "tu_todo", "content": "ok"},
	}}})
	f.send(t, map[string]any{"type": "result", "subtype": "success", "total_cost_usd": 0.5, "usage": map[string]any{
		"input_tokens": 10, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 1, "output_tokens": 7,
		"output_tokens_details": map[string]any{"thinking_tokens": 3}}})
	var evs []event.Draft
	for {
		d := <-f.evs
		evs = append(evs, d)
		if d.Type == event.TurnCompleted {
			break
		}
	}
	started := map[string]event.ItemData{}
	completed := map[string]event.ItemData{}
	var plan *event.TurnPlanData
	var usage *event.TurnUsageData
	for _, d := range evs {
		switch d.Type {
		case event.ItemStarted:
			it := decodeData[event.ItemData](t, d)
			started[it.ItemID] = it
		case event.ItemCompleted:
			it := decodeData[event.ItemData](t, d)
			completed[it.ItemID] = it
		case event.TurnPlan:
			p := decodeData[event.TurnPlanData](t, d)
			plan = &p
		case event.TurnUsage:
			u := decodeData[event.TurnUsageData](t, d)
			usage = &u
		}
	}
	if started["tu_bash"].Kind != event.KindCommandExecution || started["tu_edit"].Kind != event.KindFileChange ||
		started["tu_mcp"].Kind != event.KindMcpToolCall || started["tu_mcp"].ParentItemID != "tu_task" {
		t.Fatalf("started %+v", started)
	}
	if _, ok := started["tu_todo"]; ok {
		t.Fatal("TodoWrite opened an item")
	}
	if b := completed["tu_bash"]; b.Status != event.ItemCompletedStatus || b.Payload.(map[string]any)["output"] != "a\nb\n" ||
		b.Payload.(map[string]any)["command"] != "ls" {
		t.Fatalf("bash completed %+v", b)
	}
	if e := completed["tu_edit"]; e.Status != event.ItemFailedStatus {
		t.Fatalf("edit completed %+v", e)
	}
	if m := completed["tu_mcp"]; m.Status != event.ItemInterruptedStatus {
		t.Fatalf("an item open at the turn's end: %+v", m)
	}
	if plan == nil || len(plan.Steps) != 2 || plan.Steps[0].Status != "completed" || plan.Steps[1].Status != "inProgress" {
		t.Fatalf("plan %+v", plan)
	}
	if usage == nil || usage.InputTokens != 15 || usage.CachedInputTokens != 4 || usage.OutputTokens != 7 ||
		usage.ReasoningTokens != 3 || usage.TotalTokens != 22 || usage.CostUSD == nil || *usage.CostUSD != 0.5 {
		t.Fatalf("usage %+v", usage)
	}
	if tc := decodeData[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v", tc)
	}
}

// An error result fails the turn with the CLI's errors; after Interrupt
// the result ends it interrupted (user_cancel).
func TestResultStatuses(t *testing.T) {
	f := newFake(t, nil)
	f.started(t)
	f.send(t, map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "errors": []string{"boom"}})
	if tc := decodeData[event.TurnCompletedData](t, f.next(t, event.TurnCompleted)); tc.Status != event.StatusFailed ||
		tc.Reason != event.ReasonProviderError || tc.Error != "boom" {
		t.Fatalf("error result: %+v", tc)
	}
	if err := f.a.StartTurn(t.Context(), "t_2", "again"); err != nil {
		t.Fatal(err)
	}
	f.read(t)
	done := make(chan error, 1)
	go func() { _, err := f.a.Interrupt(t.Context()); done <- err }()
	req := f.read(t)
	if r := req["request"].(map[string]any); req["type"] != "control_request" || r["subtype"] != "interrupt" {
		t.Fatalf("interrupt wrote %v", req)
	}
	f.send(t, map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": req["request_id"]}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.send(t, map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true})
	if tc := decodeData[event.TurnCompletedData](t, f.next(t, event.TurnCompleted)); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel {
		t.Fatalf("interrupted: %+v", tc)
	}
}
