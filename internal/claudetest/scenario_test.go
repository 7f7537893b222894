package claudetest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/claudetest"
	"github.com/sessiond/sessiond/internal/event"
)

// A streamed turn: thinking as a reasoning item, the text's deltas as
// message.delta with the block's item id, the whole as message.completed,
// turn.usage with the CLI's cost, turn.completed; the session's thread id
// is Claude's session_id from system/init; no anomaly is logged.
func TestClaudeStreamedTurn(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Reply{Thinking: []string{"let me ", "think"}, Deltas: []string{"Hel", "lo ", "world"}})
	d := daemonWith(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := newSession(t, d, "claude", t.TempDir())
	turn := s.send(t, "say hello")
	done := decode[event.TurnCompletedData](t, s.f.next(t, event.TurnCompleted))
	if done.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v; events %s", done, s.f.types())
	}
	var text, itemID, completed, reasoning string
	var usage *event.TurnUsageData
	for _, ev := range s.f.all() {
		if ev.TurnID != turn {
			continue
		}
		switch ev.Type {
		case event.MessageDelta:
			dd := decode[event.DeltaData](t, ev)
			text += dd.Text
			itemID = dd.ItemID
		case event.MessageCompleted:
			dd := decode[event.DeltaData](t, ev)
			completed = dd.Text
			if dd.ItemID != itemID || itemID == "" {
				t.Errorf("message.completed item %q, deltas' %q", dd.ItemID, itemID)
			}
		case event.ItemCompleted:
			it := decode[event.ItemData](t, ev)
			if it.Kind == event.KindReasoning {
				reasoning, _ = it.Payload.(map[string]any)["text"].(string)
			}
		case event.TurnUsage:
			u := decode[event.TurnUsageData](t, ev)
			usage = &u
		}
	}
	if text != "Hello world" || completed != "Hello world" || reasoning != "let me think" {
		t.Fatalf("deltas %q, completed %q, reasoning %q; events %s", text, completed, reasoning, s.f.types())
	}
	if usage == nil || usage.OutputTokens != 5 || usage.CachedInputTokens != 2 || usage.CostUSD == nil {
		t.Errorf("turn.usage %+v", usage)
	}
	var info api.SessionInfo
	if err := s.c.Call(ctxT(t), "agentSession.get", api.SessionParams{SessionID: s.id}, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.ThreadID) != 36 {
		t.Errorf("threadId %q: want Claude's session_id", info.ThreadID)
	}
	noAnomalies(t, d)
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
			d := daemonWith(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
			s := newSession(t, d, "claude", dir)
			s.send(t, "run it")
			started := decode[event.ItemData](t, s.f.next(t, event.ItemStarted))
			req := decode[event.ApprovalRequestedData](t, s.f.next(t, event.ApprovalRequested))
			if started.Kind != event.KindCommandExecution || req.Kind != "command" || req.ItemID != started.ItemID ||
				strings.Join(req.Options, ",") != "approve,approveForSession,deny,cancel" {
				t.Fatalf("item.started %+v, approval.requested %+v", started, req)
			}
			s.respond(t, req.RequestID, decision)
			it := decode[event.ItemData](t, s.f.next(t, event.ItemCompleted))
			done := decode[event.TurnCompletedData](t, s.f.next(t, event.TurnCompleted))
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
			noAnomalies(t, d)
		})
	}
}

// The model answers 529 (overloaded), then 500: the CLI retries each, the
// retries are journaled as provider.notice {warning, retrying}, and the
// turn completes with the reply that follows.
func TestClaudeModelErrorsRetried(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Reply{Status: 529}, claudetest.Reply{Status: 500}, claudetest.Text("fine"))
	d := daemonWith(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := newSession(t, d, "claude", t.TempDir())
	turn := s.send(t, "hello")
	done := decode[event.TurnCompletedData](t, s.f.next(t, event.TurnCompleted))
	if done.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v", done)
	}
	retries := 0
	for _, ev := range s.f.all() {
		if ev.Type == event.ProviderNotice && ev.TurnID == turn {
			if n := decode[event.NoticeData](t, ev); n.Code == "retrying" && n.Level == "warning" {
				retries++
			}
		}
	}
	if retries != 2 || len(m.Requests()) != 3 {
		t.Fatalf("%d retry notices, %d model requests; events %s", retries, len(m.Requests()), s.f.types())
	}
}

// approveForSession adds a session-scoped rule (the CLI's own addRules
// suggestion, scoped to the session): the same command in the next turn
// runs without asking.
func TestClaudeApproveForSession(t *testing.T) {
	dir := t.TempDir()
	cmd := "touch x && echo one"
	m := claudetest.NewModel(t, claudetest.Bash("toolu_1", cmd), claudetest.Text("ok"), claudetest.Bash("toolu_2", cmd), claudetest.Text("ok again"))
	d := daemonWith(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := newSession(t, d, "claude", dir)
	s.send(t, "run it")
	req := decode[event.ApprovalRequestedData](t, s.f.next(t, event.ApprovalRequested))
	s.respond(t, req.RequestID, "approveForSession")
	s.f.next(t, event.TurnCompleted)
	turn := s.send(t, "run it again")
	done := decode[event.TurnCompletedData](t, s.f.next(t, event.TurnCompleted))
	for _, ev := range s.f.all() {
		if ev.TurnID == turn && ev.Type == event.ApprovalRequested {
			t.Fatalf("the second run asked again: %s", ev.Data)
		}
	}
	var it event.ItemData
	for _, ev := range s.f.all() {
		if ev.TurnID == turn && ev.Type == event.ItemCompleted {
			it = decode[event.ItemData](t, ev)
		}
	}
	if done.Status != event.StatusCompleted || it.Status != event.ItemCompletedStatus {
		t.Fatalf("second turn %+v, item %+v", done, it)
	}
}
