package acpagent

import (
	"context"
	"encoding/json"

	"github.com/sessiond/sessiond/internal/event"
)

func textBlock(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// toolKind is the ACP tool kind of an item kind.
func toolKind(kind string) string {
	switch kind {
	case event.KindCommandExecution:
		return "execute"
	case event.KindFileChange:
		return "edit"
	case event.KindWebSearch:
		return "search"
	}
	return "other"
}

// toolStatus is the ACP status of an item.completed status.
func toolStatus(status string) string {
	if status == event.ItemCompletedStatus || status == "" {
		return "completed"
	}
	return "failed"
}

// planStatus maps a turn.plan step status onto ACP's.
func planStatus(s string) string {
	switch s {
	case "completed":
		return "completed"
	case "inProgress", "in_progress":
		return "in_progress"
	}
	return "pending"
}

// translate turns one journal event into session/update notifications
// (and, live, approvals into session/request_permission). Events at or
// before the last one translated are skipped: the replay and the live
// feed overlap by design, and each event goes out once.
func (b *bridge) translate(ctx context.Context, s *session, ev event.Event, replaying bool) {
	s.mu.Lock()
	if ev.Seq <= s.lastSeq {
		s.mu.Unlock()
		return
	}
	s.lastSeq = ev.Seq
	ours := s.ours[ev.TurnID]
	s.mu.Unlock()
	s.turnEvent(ev)
	up := func(u map[string]any) {
		b.notify("session/update", map[string]any{"sessionId": s.id, "update": u})
	}
	switch ev.Type {
	case event.TurnStarted:
		var d event.TurnStartedData
		if json.Unmarshal(ev.Data, &d) == nil && d.Text != "" && !ours && !b.isOurs(s, d.ClientMessageID) {
			up(map[string]any{"sessionUpdate": "user_message_chunk", "content": textBlock(d.Text)})
		}
	case event.MessageDelta:
		var d event.DeltaData
		if json.Unmarshal(ev.Data, &d) == nil && d.Text != "" {
			up(map[string]any{"sessionUpdate": "agent_message_chunk", "content": textBlock(d.Text)})
		}
	case event.ItemDelta:
		var d event.ItemDeltaData
		if json.Unmarshal(ev.Data, &d) != nil || d.Text == "" {
			return
		}
		switch d.Stream {
		case event.StreamReasoning, event.StreamReasoningSummary:
			up(map[string]any{"sessionUpdate": "agent_thought_chunk", "content": textBlock(d.Text)})
		}
	case event.ItemStarted, event.ItemCompleted:
		var d event.ItemData
		if json.Unmarshal(ev.Data, &d) != nil || d.ItemID == "" {
			return
		}
		if d.Kind == event.KindReasoning || d.Kind == event.KindPlan {
			return // their text comes as thought chunks and turn.plan
		}
		title := d.Title
		if title == "" {
			title = d.Kind
		}
		if ev.Type == event.ItemStarted {
			u := map[string]any{"sessionUpdate": "tool_call", "toolCallId": d.ItemID, "title": title,
				"kind": toolKind(d.Kind), "status": "in_progress"}
			if d.Payload != nil {
				u["rawInput"] = d.Payload
			}
			up(u)
			return
		}
		u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": d.ItemID, "title": title,
			"kind": toolKind(d.Kind), "status": toolStatus(d.Status)}
		if d.Payload != nil {
			u["rawOutput"] = d.Payload
		}
		up(u)
	case event.TurnPlan:
		var d event.TurnPlanData
		if json.Unmarshal(ev.Data, &d) != nil {
			return
		}
		entries := make([]map[string]any, 0, len(d.Steps))
		for _, st := range d.Steps {
			entries = append(entries, map[string]any{"content": st.Step, "priority": "medium", "status": planStatus(st.Status)})
		}
		up(map[string]any{"sessionUpdate": "plan", "entries": entries})
	case event.ApprovalRequested:
		if !replaying {
			b.ask(ctx, s, ev)
		}
	}
}

func (b *bridge) isOurs(s *session, cmid string) bool {
	if cmid == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prompt != nil && s.prompt.cmid == cmid
}
