package echo

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// waitResult waits for a request's result; ok is false when the turn was
// interrupted (finished here) or stdin ended.
func (s *server) waitResult(th *thread, tu *activeTurn, text string, ch chan json.RawMessage) (json.RawMessage, bool) {
	select {
	case res := <-ch:
		return res, true
	case <-tu.cancel:
		s.dropApproval(ch)
		s.finishTurn(th, tu, text, "", "interrupted", false)
		return nil, false
	case <-s.eof:
		return nil, false
	}
}

// playWork plays /work: one turn with every item kind codex v2 has, in
// its shapes — a plan, reasoning with summary and text deltas, a command
// whose approval it asks first and whose output streams (outputs deltas),
// a file change with a diff, a turn diff and token usage; thinks is the
// number of reasoning text deltas (the uncapped item stream of the
// benchmark). It returns the answer's suffix; ok is false when the turn
// already ended.
func (s *server) playWork(th *thread, tu *activeTurn, text string, outputs, thinks int, with func(kv ...any) map[string]any) (string, bool) {
	now := func() int64 { return time.Now().UnixMilli() }
	item := func(method string, it map[string]any) {
		s.w.notify(method, with("item", it, "startedAtMs", now(), "completedAtMs", now()))
	}
	plan := func(states ...string) {
		steps := []any{}
		for i, name := range []string{"think", "run a command", "edit a file"} {
			steps = append(steps, map[string]any{"step": name, "status": states[i]})
		}
		s.w.notify("turn/plan/updated", with("explanation", "echo /work", "plan", steps))
	}
	plan("inProgress", "pending", "pending")

	rs := tu.id + "_rs"
	item("item/started", map[string]any{"type": "reasoning", "id": rs, "summary": []any{}, "content": []any{}})
	s.w.notify("item/reasoning/summaryTextDelta", with("itemId", rs, "delta", "Planning the work", "summaryIndex", 0))
	thought := "The user asked for /work."
	if thinks > 1 {
		thought = strings.Repeat("thinking", thinks)
		for range thinks {
			s.w.send(map[string]any{"method": "item/reasoning/textDelta",
				"params": with("itemId", rs, "delta", "thinking", "contentIndex", 0)}, false)
		}
	} else {
		s.w.notify("item/reasoning/textDelta", with("itemId", rs, "delta", thought, "contentIndex", 0))
	}
	item("item/completed", map[string]any{"type": "reasoning", "id": rs,
		"summary": []string{"Planning the work"}, "content": []string{thought}})
	plan("completed", "inProgress", "pending")

	cmd := tu.id + "_cmd"
	command := fmt.Sprintf("/bin/sh -c 'seq %d'", outputs)
	exec := map[string]any{"type": "commandExecution", "id": cmd, "command": command, "cwd": th.cwd, "status": "inProgress",
		"commandActions": []any{}, "aggregatedOutput": nil, "exitCode": nil, "durationMs": nil, "source": "agent"}
	item("item/started", exec)
	res, ok := s.waitResult(th, tu, text, s.request("item/commandExecution/requestApproval", with(
		"itemId", cmd, "command", command, "cwd", th.cwd, "reason", "the echo provider asks (/work)", "startedAtMs", now())))
	if !ok {
		return "", false
	}
	ran := "ran"
	switch decisionOf(res) {
	case "accept", "acceptForSession":
		var out strings.Builder
		for i := 1; i <= outputs; i++ {
			line := fmt.Sprintf("%d\n", i)
			out.WriteString(line)
			s.w.send(map[string]any{"method": "item/commandExecution/outputDelta",
				"params": with("itemId", cmd, "delta", line)}, outputs <= 100)
		}
		exec["status"], exec["exitCode"], exec["durationMs"], exec["aggregatedOutput"] = "completed", 0, 1, out.String()
	case "cancel":
		exec["status"] = "declined"
		item("item/completed", exec)
		s.finishTurn(th, tu, text, "", "interrupted", false)
		return "", false
	default:
		exec["status"] = "declined"
		ran = "declined"
	}
	item("item/completed", exec)
	plan("completed", "completed", "inProgress")

	fc := tu.id + "_fc"
	diff := "@@ -0,0 +1 @@\n+echo work\n"
	change := map[string]any{"type": "fileChange", "id": fc, "status": "inProgress",
		"changes": []any{map[string]any{"path": "work.txt", "kind": map[string]any{"type": "add"}, "diff": diff}}}
	item("item/started", change)
	s.w.notify("item/fileChange/outputDelta", with("itemId", fc, "delta", "Success. Updated: A work.txt\n"))
	change["status"] = "completed"
	item("item/completed", change)
	plan("completed", "completed", "completed")
	s.w.notify("turn/diff/updated", with("diff", "--- /dev/null\n+++ b/work.txt\n"+diff))
	usage := map[string]any{"inputTokens": 120, "cachedInputTokens": 20, "outputTokens": 30,
		"reasoningOutputTokens": 10, "totalTokens": 150}
	s.w.notify("thread/tokenUsage/updated", with("tokenUsage", map[string]any{
		"total": usage, "last": usage, "modelContextWindow": 128000}))
	return " (work: command " + ran + ")", true
}

// playAsk plays /ask: an item/tool/requestUserInput question; the answer
// ends up in the reply.
func (s *server) playAsk(th *thread, tu *activeTurn, text string, with func(kv ...any) map[string]any) (string, bool) {
	q := map[string]any{"id": "q1", "header": "Echo", "question": "What should echo say?", "isOther": true, "isSecret": false,
		"options": []any{map[string]any{"label": "hello", "description": "say hello"}, map[string]any{"label": "bye", "description": "say bye"}}}
	res, ok := s.waitResult(th, tu, text, s.request("item/tool/requestUserInput", with(
		"itemId", tu.id+"_ask", "isBlocking", true, "questions", []any{q})))
	if !ok {
		return "", false
	}
	var r struct {
		Answers map[string]struct {
			Answers []string `json:"answers"`
		} `json:"answers"`
	}
	_ = json.Unmarshal(res, &r)
	got := strings.Join(r.Answers["q1"].Answers, ", ")
	if got == "" {
		got = "(none)"
	}
	return " (answer: " + got + ")", true
}
