package claudetest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// A streamed turn: thinking as a reasoning item, the text's deltas as
// message.delta with the block's item id, the whole as message.completed,
// turn.usage with the CLI's cost, turn.completed; the session's thread id
// is Claude's session_id from system/init; no anomaly is logged.
func TestClaudeStreamedTurn(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Reply{Thinking: []string{"let me ", "think"}, Deltas: []string{"Hel", "lo ", "world"}})
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	turn := s.Send(t, "say hello")
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if done.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v; events %s", done, s.Types())
	}
	text, completed := s.Message(t, turn)
	var reasoning string
	var usage *event.TurnUsageData
	for _, ev := range s.Events() {
		if ev.TurnID != turn {
			continue
		}
		switch ev.Type {
		case event.ItemCompleted:
			it := providertest.Decode[event.ItemData](t, ev)
			if it.Kind == event.KindReasoning {
				reasoning, _ = it.Payload.(map[string]any)["text"].(string)
			}
		case event.TurnUsage:
			u := providertest.Decode[event.TurnUsageData](t, ev)
			usage = &u
		}
	}
	if text != "Hello world" || completed != "Hello world" || reasoning != "let me think" {
		t.Fatalf("deltas %q, completed %q, reasoning %q; events %s", text, completed, reasoning, s.Types())
	}
	if usage == nil || usage.OutputTokens != 5 || usage.CachedInputTokens != 2 || usage.CostUSD == nil {
		t.Errorf("turn.usage %+v", usage)
	}
	var info api.SessionInfo
	if err := s.C.Call(providertest.Ctx(t), "agentSession.get", api.SessionParams{SessionID: s.ID}, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.ThreadID) != 36 {
		t.Errorf("threadId %q: want Claude's session_id", info.ThreadID)
	}
	providertest.NoAnomalies(t, d, "claude")
}

// A Bash command that writes asks first (can_use_tool → approval.requested
// kind command). Approved, it runs: the file exists and the item completes
// with its output; denied, it never runs and the item ends declined.
func TestClaudeBashApproval(t *testing.T) {
	for _, decision := range []string{"approve", "deny"} {
		t.Run(decision, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "ran")
			m := claudetest.NewModel(t, claudetest.Bash("toolu_1", "touch "+marker+" && echo done"), claudetest.Text("all ", "done"))
			d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
			s := providertest.NewSession(t, d, client, "claude", dir)
			s.Send(t, "run it")
			started := providertest.Decode[event.ItemData](t, s.Next(t, event.ItemStarted))
			req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
			if started.Kind != event.KindCommandExecution || req.Kind != "command" || req.ItemID != started.ItemID ||
				strings.Join(req.Options, ",") != "approve,approveForSession,deny,cancel" {
				t.Fatalf("item.started %+v, approval.requested %+v", started, req)
			}
			s.Respond(t, req.RequestID, decision)
			it := providertest.Decode[event.ItemData](t, s.Next(t, event.ItemCompleted))
			done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
			_, statErr := os.Stat(marker)
			p, _ := it.Payload.(map[string]any)
			switch decision {
			case "approve":
				if statErr != nil || it.Status != event.ItemCompletedStatus || !strings.Contains(p["output"].(string), "done") {
					t.Fatalf("approved: stat %v, item %+v", statErr, it)
				}
			case "deny":
				if statErr == nil || it.Status != event.ItemDeclinedStatus {
					t.Fatalf("denied: stat %v, item %+v", statErr, it)
				}
			}
			if done.Status != event.StatusCompleted || p["command"] != "touch "+marker+" && echo done" {
				t.Fatalf("turn %+v, payload %v", done, p)
			}
			providertest.NoAnomalies(t, d, "claude")
		})
	}
}

// The model answers 529 (overloaded), then 500: the CLI retries each, the
// retries are journaled as provider.notice {warning, retrying}, and the
// turn completes with the reply that follows.
func TestClaudeModelErrorsRetried(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Reply{Status: 529}, claudetest.Reply{Status: 500}, claudetest.Text("fine"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	turn := s.Send(t, "hello")
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if done.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v", done)
	}
	retries := 0
	for _, ev := range s.Events() {
		if ev.Type == event.ProviderNotice && ev.TurnID == turn {
			if n := providertest.Decode[event.NoticeData](t, ev); n.Code == "retrying" && n.Level == "warning" {
				retries++
			}
		}
	}
	if retries != 2 || len(m.Requests()) != 3 {
		t.Fatalf("%d retry notices, %d model requests; events %s", retries, len(m.Requests()), s.Types())
	}
}

// approveForSession adds a session-scoped rule (the CLI's own addRules
// suggestion, scoped to the session): the same command in the next turn
// runs without asking.
func TestClaudeApproveForSession(t *testing.T) {
	dir := t.TempDir()
	cmd := "touch x && echo one"
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", cmd), claudetest.Text("ok"), claudetest.Bash("toolu_2", cmd), claudetest.Text("ok again"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", dir)
	s.Send(t, "run it")
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	s.Respond(t, req.RequestID, "approveForSession")
	s.Next(t, event.TurnCompleted)
	turn := s.Send(t, "run it again")
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	for _, ev := range s.Events() {
		if ev.TurnID == turn && ev.Type == event.ApprovalRequested {
			t.Fatalf("the second run asked again: %s", ev.Data)
		}
	}
	var it event.ItemData
	for _, ev := range s.Events() {
		if ev.TurnID == turn && ev.Type == event.ItemCompleted {
			it = providertest.Decode[event.ItemData](t, ev)
		}
	}
	if done.Status != event.StatusCompleted || it.Status != event.ItemCompletedStatus {
		t.Fatalf("second turn %+v, item %+v", done, it)
	}
}

// The Write tool asks first as a fileChange; approved, the file is
// written and its item completes with the path.
func TestClaudeWriteApproval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hello.txt")
	m := claudetest.NewModel(t, claudetest.Tool("toolu_w", "Write", map[string]any{"file_path": path, "content": "hi\n"}), claudetest.Text("written"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", dir)
	s.Send(t, "write it")
	started := providertest.Decode[event.ItemData](t, s.Next(t, event.ItemStarted))
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	if started.Kind != event.KindFileChange || req.Kind != "fileChange" || req.ItemID != "toolu_w" {
		t.Fatalf("item.started %+v, approval.requested %+v", started, req)
	}
	s.Respond(t, req.RequestID, "approve")
	it := providertest.Decode[event.ItemData](t, s.Next(t, event.ItemCompleted))
	s.Next(t, event.TurnCompleted)
	b, err := os.ReadFile(path)
	changes, _ := it.Payload.(map[string]any)["changes"].([]any)
	if err != nil || string(b) != "hi\n" || it.Status != event.ItemCompletedStatus || len(changes) != 1 ||
		changes[0].(map[string]any)["path"] != path || changes[0].(map[string]any)["kind"] != "add" {
		t.Fatalf("file %q %v, item %+v", b, err, it)
	}
}

// AskUserQuestion asks as userInput; the answers given with approve reach
// the model in the tool's result.
func TestClaudeAskUserQuestion(t *testing.T) {
	q := map[string]any{"questions": []any{map[string]any{"question": "Which fruit?", "header": "Fruit", "multiSelect": false,
		"options": []any{map[string]any{"label": "apple", "description": "red"}, map[string]any{"label": "pear", "description": "green"}}}}}
	m := claudetest.NewModel(t, claudetest.Tool("toolu_q", "AskUserQuestion", q), claudetest.Text("thanks"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	s.Send(t, "ask me")
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	if req.Kind != "userInput" || strings.Join(req.Options, ",") != "approve,deny,cancel" {
		t.Fatalf("approval.requested %+v", req)
	}
	if err := s.C.Call(providertest.Ctx(t), "agentSession.respond", api.RespondParams{SessionID: s.ID, RequestID: req.RequestID,
		Decision: "approve", Answers: map[string][]string{"Which fruit?": {"pear"}}}, nil); err != nil {
		t.Fatal(err)
	}
	s.Next(t, event.TurnCompleted)
	reqs := m.Requests()
	if len(reqs) != 2 || !strings.Contains(toolResult(t, reqs[1], "toolu_q"), "pear") {
		t.Fatalf("the model did not get the answer: %d requests", len(reqs))
	}
}

// toolResult is the text of the tool_result for id in a request.
func toolResult(t *testing.T, r claudetest.Request, id string) string {
	t.Helper()
	var msgs []struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal([]byte(r.Messages()), &msgs)
	for _, m := range msgs {
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" && b.ToolUseID == id {
				return string(b.Content)
			}
		}
	}
	t.Fatalf("no tool_result for %s in %s", id, r.Messages())
	return ""
}
