package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/golden"
)

func ev(typ, turn string, data any) event.Event {
	d := event.New(typ, turn, data)
	return event.Event{Type: d.Type, TurnID: d.TurnID, Data: d.Data}
}

// TestRendererWholeReply: a reply that came only as message.completed (no
// deltas, as codex sends when the model streamed none) is printed whole;
// a streamed one is not printed twice; control characters are escaped.
func TestRendererWholeReply(t *testing.T) {
	var b bytes.Buffer
	r := newRenderer(&b, "s_1", true)
	for _, e := range []event.Event{
		ev(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "hi\x1b[31m"}),
		ev(event.MessageCompleted, "t1", event.DeltaData{Text: "whole reply", ItemID: "m1"}),
		ev(event.TurnCompleted, "t1", event.TurnCompletedData{Status: "completed"}),
		ev(event.MessageDelta, "t2", event.DeltaData{Text: "stre", ItemID: "m2"}),
		ev(event.MessageDelta, "t2", event.DeltaData{Text: "amed", ItemID: "m2"}),
		ev(event.MessageCompleted, "t2", event.DeltaData{Text: "streamed", ItemID: "m2"}),
		ev(event.TurnCompleted, "t2", event.TurnCompletedData{Status: "interrupted", Reason: "user_cancel"}),
	} {
		r.event(e)
	}
	got := b.String()
	want := "> hi\\x1b[31m\nwhole reply\nstreamed\nturn interrupted user_cancel\n"
	if got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
	if strings.Count(got, "streamed") != 1 {
		t.Fatal("a streamed reply printed twice")
	}
}

// TestProcTree: without a cgroup, a session's tree is its provider, the
// provider's descendants and the processes tagged with the session (a
// double-forked child is no descendant), each once.
func TestProcTree(t *testing.T) {
	ps := procSnapshot{
		kids:   map[int][]int{1: {10, 99}, 10: {11, 12}, 12: {13}, 99: {100}, 50: {51}},
		tagged: map[string][]int{"s1": {99, 11}, "s2": {50}},
	}
	pids, src := ps.tree(api.SessionInfo{SessionID: "s1", PID: 10})
	sort.Ints(pids)
	if src != "proc" || fmt.Sprint(pids) != "[10 11 12 13 99 100]" {
		t.Fatalf("tree = %v from %s, want [10 11 12 13 99 100] from proc", pids, src)
	}
	if pids, _ := ps.tree(api.SessionInfo{SessionID: "s3", PID: 13}); fmt.Sprint(pids) != "[13]" {
		t.Fatalf("a leaf's tree = %v", pids)
	}
}

// TestCPUGrowth: a frame's CPU is each member's growth plus all of a new
// member; one that left adds nothing, a counter never goes back.
func TestCPUGrowth(t *testing.T) {
	prev := map[int]float64{1: 1.0, 2: 5.0, 3: 2.0}
	cur := map[int]float64{1: 1.5, 2: 5.0, 4: 0.25} // 3 exited, 4 is new
	if got := cpuGrowth(prev, cur); got != 0.75 {
		t.Fatalf("cpuGrowth = %v, want 0.75", got)
	}
	if got := cpuGrowth(map[int]float64{1: 2}, map[int]float64{1: 1}); got != 0 {
		t.Fatalf("cpuGrowth of a pid reused by a younger process = %v, want 0", got)
	}
}

// claudeTurn is a turn as the claude-stream-json adapter journals it
// (docs/protocol.md's mapping): TodoWrite as turn.plan, a Bash tool_use
// titled "Bash" with the command in its payload, can_use_tool approvals
// whose detail is the raw control request (the command, the questions
// under input), a tool_result without an exit code, a Write, streamed
// text, usage with the cost.
func claudeTurn(cmd, reqID, output string) []event.Event {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	cost := 0.0123
	return []event.Event{
		ev(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "fix the tests"}),
		ev(event.TurnPlan, "t1", event.TurnPlanData{Steps: []event.PlanStep{{Step: "read", Status: "completed"}, {Step: "fix", Status: "inProgress"}}}),
		ev(event.ItemStarted, "t1", event.ItemData{ItemID: "toolu_1", Kind: event.KindCommandExecution, Title: "Bash",
			Payload: map[string]any{"command": cmd}}),
		ev(event.ApprovalRequested, "t1", event.ApprovalRequestedData{RequestID: reqID, Kind: "command", ItemID: "toolu_1",
			Detail:  raw(map[string]any{"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": cmd, "description": "run"}}),
			Options: []string{"approve", "approveForSession", "deny", "cancel"}}),
		ev(event.ApprovalResolved, "t1", event.ApprovalResolvedData{RequestID: reqID, Decision: "approve"}),
		ev(event.ItemCompleted, "t1", event.ItemData{ItemID: "toolu_1", Kind: event.KindCommandExecution, Status: "completed",
			Payload: map[string]any{"command": cmd, "output": output}}),
		ev(event.ItemStarted, "t1", event.ItemData{ItemID: "toolu_2", Kind: event.KindFileChange, Title: "Write"}),
		ev(event.ItemCompleted, "t1", event.ItemData{ItemID: "toolu_2", Kind: event.KindFileChange, Status: "completed",
			Payload: map[string]any{"changes": []any{map[string]any{"kind": "add", "path": "/src/fix.go"}}}}),
		ev(event.ApprovalRequested, "t1", event.ApprovalRequestedData{RequestID: reqID + "2", Kind: "userInput", ItemID: "toolu_3",
			Detail: raw(map[string]any{"subtype": "can_use_tool", "tool_name": "AskUserQuestion", "input": map[string]any{
				"questions": []any{map[string]any{"question": "Which database?", "header": "DB",
					"options": []any{map[string]any{"label": "sqlite"}, map[string]any{"label": "postgres"}}}}}}),
			Options: []string{"approve", "deny", "cancel"}}),
		ev(event.ApprovalResolved, "t1", event.ApprovalResolvedData{RequestID: reqID + "2", Decision: "approve"}),
		ev(event.MessageDelta, "t1", event.DeltaData{Text: "Fixed ", ItemID: "msg_1_0"}),
		ev(event.MessageDelta, "t1", event.DeltaData{Text: "it.", ItemID: "msg_1_0"}),
		ev(event.MessageCompleted, "t1", event.DeltaData{Text: "Fixed it.", ItemID: "msg_1_0"}),
		ev(event.TurnUsage, "t1", event.TurnUsageData{InputTokens: 900, CachedInputTokens: 800, OutputTokens: 50, TotalTokens: 950, CostUSD: &cost}),
		ev(event.TurnCompleted, "t1", event.TurnCompletedData{Status: "completed"}),
	}
}

// TestRendererClaudeTurn: a Claude turn reads like a codex one: the
// command itself (not "Bash"), its output and that Claude gives no exit
// code, the approval with its command, the question with its options and
// a respond line carrying --answers keyed by the question's text.
func TestRendererClaudeTurn(t *testing.T) {
	var b bytes.Buffer
	r := newRenderer(&b, "s_1", true)
	for _, e := range claudeTurn("go test ./...", "c1-req_1", "ok  \tpkg\t0.1s\n") {
		r.event(e)
	}
	golden.Check(t, "ctl_render_claude.golden", b.String())
}

// TestRendererHostileText: ESC, CR, bidi controls and invalid UTF-8 from a
// provider reach the terminal escaped in every line, and a request id
// built to run a command when the respond line is pasted stays one
// shell word.
func TestRendererHostileText(t *testing.T) {
	var b bytes.Buffer
	r := newRenderer(&b, "s_1", true)
	pwned := filepath.Join(t.TempDir(), "pwned")
	evil := "x'; touch " + pwned + "; echo '$(id)`id`"
	cmd := "rm -rf \x1b[2J\r\u202eevil\xff"
	for _, e := range claudeTurn(cmd, evil, strings.Repeat("line\n", 1000)+"\x1b]0;title\x07\xfe\n") {
		r.event(e)
	}
	out := b.String()
	if !utf8.ValidString(out) || strings.ContainsAny(out, "\x1b\r\x07\u202e") {
		t.Fatalf("raw control or invalid UTF-8 printed:\n%q", out)
	}
	// Invalid UTF-8 never reaches ctl: the journal's JSON carries U+FFFD.
	if !strings.Contains(out, "$ rm -rf \\x1b[2J\\r\\u202eevil\uFFFD") || !strings.Contains(out, "  | \\x1b]0;title\\x07\uFFFD") ||
		!strings.Contains(out, "  | … (998 more lines)") {
		t.Fatalf("escaped command or output tail missing:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		for _, p := range []string{"answer: ", "refuse: "} {
			line, ok := strings.CutPrefix(l, p)
			if !ok {
				continue
			}
			if f := strings.Fields(line); strings.Contains(f[len(f)-1], "|") {
				line = strings.Join(f[:len(f)-1], " ") // the choices, one to pick
			}
			// What a shell makes of the pasted line: the fifth word is the request id.
			got, err := exec.Command("/bin/sh", "-c", "set -- "+line+`; printf %s "$5"`).Output()
			if err != nil || (string(got) != evil && string(got) != evil+"2") {
				t.Fatalf("pasting %q: request id %q, %v; want %q", line, got, err, evil)
			}
		}
	}
	// One 64 KiB line of output: its tail line is cut, the turn stays readable.
	b.Reset()
	r = newRenderer(&b, "s_1", false)
	for _, e := range claudeTurn("cat big", "r1", strings.Repeat("é", 32<<10)+"\n") {
		r.event(e)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if w := displayWidth(l); w > outputLineCells+4 {
			t.Fatalf("a rendered line is %d cells wide", w)
		}
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a pasted respond line ran the provider's command")
	}
}

// acpTurn is a turn as the acp adapter journals one of codex-acp
// (docs/protocol.md "ACP agents"): a reasoning item, the plan, a command
// whose permission detail is the session/request_permission params (the
// command is the tool call's title), its output from rawOutput, a file
// change with its diff, the streamed reply, usage_update's usage and the
// stopReason.
func acpTurn() []event.Event {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	return []event.Event{
		ev(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "make it pass"}),
		ev(event.ItemStarted, "t1", event.ItemData{ItemID: "t1_thought1", Kind: event.KindReasoning, Payload: map[string]any{}}),
		ev(event.ItemDelta, "t1", event.ItemDeltaData{ItemID: "t1_thought1", Stream: event.StreamReasoning, Text: "run the tests first"}),
		ev(event.ItemCompleted, "t1", event.ItemData{ItemID: "t1_thought1", Kind: event.KindReasoning, Status: "completed",
			Payload: map[string]any{"summary": []string{}, "text": "run the tests first"}}),
		ev(event.TurnPlan, "t1", event.TurnPlanData{Steps: []event.PlanStep{{Step: "run the tests", Status: "inProgress"}, {Step: "fix", Status: "pending"}}}),
		ev(event.ItemStarted, "t1", event.ItemData{ItemID: "call_1", Kind: event.KindCommandExecution, Title: "go test ./...",
			Payload: map[string]any{"command": "go test ./...", "cwd": "/src", "output": "", "outputTruncated": 0}}),
		ev(event.ApprovalRequested, "t1", event.ApprovalRequestedData{RequestID: "f1-0", Kind: "command", ItemID: "call_1",
			Detail: raw(map[string]any{"sessionId": "019a-sess", "toolCall": map[string]any{"toolCallId": "call_1", "title": "go test ./...",
				"kind": "execute", "status": "pending", "rawInput": map[string]any{"command": []string{"/bin/bash", "-lc", "go test ./..."}}},
				"options": []any{map[string]any{"optionId": "approved", "name": "Yes, proceed", "kind": "allow_once"},
					map[string]any{"optionId": "abort", "name": "No", "kind": "reject_once"}}}),
			Options: []string{"approve", "deny", "cancel"}}),
		ev(event.ApprovalResolved, "t1", event.ApprovalResolvedData{RequestID: "f1-0", Decision: "approve"}),
		ev(event.ItemDelta, "t1", event.ItemDeltaData{ItemID: "call_1", Stream: event.StreamOutput, Text: "ok  \tpkg\t0.1s\n"}),
		ev(event.ItemCompleted, "t1", event.ItemData{ItemID: "call_1", Kind: event.KindCommandExecution, Title: "go test ./...", Status: "completed",
			Payload: map[string]any{"command": "go test ./...", "cwd": "/src", "exitCode": 0, "output": "ok  \tpkg\t0.1s\n", "outputTruncated": 0}}),
		ev(event.ItemStarted, "t1", event.ItemData{ItemID: "call_2", Kind: event.KindFileChange, Title: "Edit fix.go",
			Payload: map[string]any{"changes": []any{}}}),
		ev(event.ItemCompleted, "t1", event.ItemData{ItemID: "call_2", Kind: event.KindFileChange, Title: "Edit fix.go", Status: "completed",
			Payload: map[string]any{"changes": []any{map[string]any{"path": "/src/fix.go", "kind": "update", "diff": "--- a/src/fix.go\n+++ b/src/fix.go\n-a\n+b\n"}}}}),
		ev(event.MessageDelta, "t1", event.DeltaData{Text: "All ", ItemID: "t1_msg2"}),
		ev(event.MessageDelta, "t1", event.DeltaData{Text: "green.", ItemID: "t1_msg2"}),
		ev(event.TurnUsage, "t1", event.TurnUsageData{TotalTokens: 11034, ContextWindow: func() *int64 { n := int64(258400); return &n }()}),
		ev(event.MessageCompleted, "t1", event.DeltaData{Text: "All green.", ItemID: "t1_msg2"}),
		ev(event.TurnCompleted, "t1", event.TurnCompletedData{Status: "completed", StopReason: "end_turn"}),
	}
}

// TestRendererACPTurn: an ACP agent's turn reads like a codex one: the
// permission names its command (the tool call's title), the command its
// output and exit code, the file change its path, the reply streams.
func TestRendererACPTurn(t *testing.T) {
	var b bytes.Buffer
	r := newRenderer(&b, "s_1", true)
	for _, e := range acpTurn() {
		r.event(e)
	}
	golden.Check(t, "ctl_render_acp.golden", b.String())
}
