package acp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
)

// textItem is the agent's text since the last item: one message item.
type textItem struct {
	id   string
	text strings.Builder
}

// thought is an open reasoning item.
type thought struct {
	id   string
	text strings.Builder
}

// onUpdate handles session/update {sessionId, update:{sessionUpdate, …}}
// by kind (tables.go). Updates of the session a session/load is replaying
// are history: not journaled. Updates of any other session than ours are
// dropped (logged once).
func (a *Adapter) onUpdate(params json.RawMessage) {
	var p struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	var k struct {
		Kind string `json:"sessionUpdate"`
	}
	if ok, _ := decodeLenient(params, &p); !ok || len(p.Update) == 0 {
		a.anomaly("bad_session_update", "params", capText(string(params), 120))
		return
	}
	_, _ = decodeLenient(p.Update, &k)
	a.mu.Lock()
	switch {
	case a.loading != "" && p.SessionID == a.loading:
		a.mu.Unlock()
		return // the load's replay of history the journal has
	case a.threadID == "":
		a.anomalyLocked("update_before_session", "kind", agentName(k.Kind))
		a.mu.Unlock()
		return // before session/new or session/load answered: no session yet
	case p.SessionID != a.threadID:
		a.anomalyLocked("update_unknown_session", "sessionId", agentName(p.SessionID), "kind", agentName(k.Kind))
		a.mu.Unlock()
		return
	}
	if _, ok := updateIgnored[k.Kind]; ok {
		a.mu.Unlock()
		return
	}
	h, mapped := updateMapped[k.Kind]
	t := a.turn
	if !mapped {
		lvl, known := updateNotices[k.Kind]
		a.mu.Unlock()
		kind := agentName(k.Kind)
		if !known {
			lvl = "info"
			a.anomaly("unknown_update_kind", "kind", kind)
		}
		a.noticeOnce("update:"+kind, lvl, "acp_"+kind, noticeText(kind, p.Update))
		return
	}
	if t == nil {
		a.anomalyLocked("update_outside_turn", "kind", agentName(k.Kind))
		a.mu.Unlock()
		return
	}
	ds := h(a, t, p.Update)
	a.mu.Unlock()
	for _, d := range ds {
		a.emit(d)
	}
}

// noticeText is a notice's message for an update of a kind not mapped
// (kind is agentName's).
func noticeText(kind string, u json.RawMessage) string {
	var n struct {
		Message string `json:"message"`
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_, _ = decodeLenient(u, &n)
	s := "the agent sent session/update " + kind
	if m := n.Message + n.Content.Text; m != "" {
		s += ": " + capText(m, 2000)
	}
	return s + " (further ones of this kind are not journaled)"
}

type textContent struct {
	Content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// onMessageChunk: the agent's text, as message.delta of the turn's
// current message item (an item or a thought in between starts a new one).
func (a *Adapter) onMessageChunk(t *openTurn, u json.RawMessage) []event.Draft {
	var c textContent
	_, _ = decodeLenient(u, &c)
	if c.Content.Type != "text" {
		typ := agentName(c.Content.Type)
		a.anomalyLocked("non_text_message_chunk", "type", typ)
		first, summary := a.firstNoticeLocked("non_text:"+typ, t.ours)
		switch {
		case first:
			return []event.Draft{event.New(event.ProviderNotice, t.ours, event.NoticeData{Level: "info", Code: "non_text_content",
				Message: "the agent sent " + typ + " content in its message; sessiond journals text only"})}
		case summary != nil:
			return []event.Draft{*summary}
		}
		return nil
	}
	ds := closeThought(t)
	if t.msg == nil {
		t.msgN++
		t.msg = &textItem{id: fmt.Sprintf("%s_msg%d", t.ours, t.msgN)}
	}
	keepText(&t.msg.text, c.Content.Text)
	return append(ds, event.NewMessageDelta(t.ours, event.DeltaData{Text: c.Content.Text, ItemID: t.msg.id}))
}

// onThoughtChunk: the agent's reasoning, as item.delta of a reasoning item.
func (a *Adapter) onThoughtChunk(t *openTurn, u json.RawMessage) []event.Draft {
	var c textContent
	_, _ = decodeLenient(u, &c)
	ds := closeMessage(t)
	if t.thought == nil {
		t.msgN++
		t.thought = &thought{id: fmt.Sprintf("%s_thought%d", t.ours, t.msgN)}
		ds = append(ds, event.New(event.ItemStarted, t.ours, event.ItemData{ItemID: t.thought.id, Kind: event.KindReasoning, Payload: map[string]any{}}))
	}
	keepText(&t.thought.text, c.Content.Text)
	return append(ds, event.NewItemDelta(t.ours, event.ItemDeltaData{ItemID: t.thought.id, Stream: event.StreamReasoning, Text: c.Content.Text}))
}

// maxPlanSteps and maxStepBytes bound a plan: the steps past the first
// maxPlanSteps are dropped (logged), a step's text is cut.
const (
	maxPlanSteps = 256
	maxStepBytes = 4096
)

// onPlan: the agent's plan replaces the last one (turn.plan).
func (a *Adapter) onPlan(t *openTurn, u json.RawMessage) []event.Draft {
	var p struct {
		Entries []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"entries"`
	}
	_, _ = decodeLenient(u, &p)
	if len(p.Entries) > maxPlanSteps {
		a.anomalyLocked("plan_too_long", "steps", len(p.Entries), "max_steps", maxPlanSteps)
		p.Entries = p.Entries[:maxPlanSteps]
	}
	d := event.TurnPlanData{Steps: make([]event.PlanStep, 0, len(p.Entries))}
	for _, e := range p.Entries {
		e.Content = capText(e.Content, maxStepBytes)
		st := e.Status
		if st == "in_progress" {
			st = "inProgress"
		}
		if st != "pending" && st != "inProgress" && st != "completed" {
			st = "pending"
		}
		d.Steps = append(d.Steps, event.PlanStep{Step: e.Content, Status: st})
	}
	return []event.Draft{event.New(event.TurnPlan, t.ours, d)}
}

// onUsage: usage_update {used, size, cost} as turn.usage.
func (a *Adapter) onUsage(t *openTurn, u json.RawMessage) []event.Draft {
	var p struct {
		Used int64  `json:"used"`
		Size *int64 `json:"size"`
		Cost *struct {
			Amount   float64 `json:"amount"`
			Currency string  `json:"currency"`
		} `json:"cost"`
	}
	_, _ = decodeLenient(u, &p)
	d := event.TurnUsageData{TotalTokens: p.Used, ContextWindow: p.Size}
	if p.Cost != nil && strings.EqualFold(p.Cost.Currency, "USD") {
		amt := p.Cost.Amount
		d.CostUSD = &amt
	}
	return []event.Draft{event.New(event.TurnUsage, t.ours, d)}
}

func closeThought(t *openTurn) []event.Draft {
	if t.thought == nil {
		return nil
	}
	th := t.thought
	t.thought = nil
	return []event.Draft{event.New(event.ItemCompleted, t.ours, event.ItemData{ItemID: th.id, Kind: event.KindReasoning,
		Status: event.ItemCompletedStatus, Payload: map[string]any{"summary": []string{}, "text": th.text.String()}})}
}

func closeMessage(t *openTurn) []event.Draft {
	if t.msg == nil {
		return nil
	}
	m := t.msg
	t.msg = nil
	return []event.Draft{event.New(event.MessageCompleted, t.ours, event.DeltaData{Text: m.text.String(), ItemID: m.id})}
}

// closeItemsLocked ends what t still has open: its reasoning and text
// complete, its tool calls complete interrupted (declined when denied).
// Needs mu.
func (a *Adapter) closeItemsLocked(t *openTurn) []event.Draft {
	ds := append(closeThought(t), closeMessage(t)...)
	for _, id := range t.toolOrder {
		tl := t.tools[id]
		if tl == nil {
			continue
		}
		st := event.ItemInterruptedStatus
		if tl.denied {
			st = event.ItemDeclinedStatus
		}
		ds = append(ds, event.New(event.ItemCompleted, t.ours, tl.completed(st)))
	}
	t.tools, t.toolOrder, t.toolBytes = map[string]*tool{}, nil, 0
	return ds
}

// maxItemText bounds the text the adapter keeps of one message or thought
// for its completed event (its deltas carry all of it).
const maxItemText = 1 << 20

// keepText appends s to b up to maxItemText bytes.
func keepText(b *strings.Builder, s string) {
	if room := maxItemText - b.Len(); room > 0 {
		b.WriteString(capText(s, room))
	}
}
