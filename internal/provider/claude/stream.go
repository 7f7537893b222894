package claude

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
)

// onStreamEvent maps the raw model stream: text deltas to message.delta,
// thinking to a reasoning item; message.completed when a text block ends.
func (a *Adapter) onStreamEvent(m *inbound, line []byte) {
	t := a.turnID()
	if t == "" {
		return
	}
	var ev struct {
		Type    string `json:"type"`
		Index   int    `json:"index"`
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
		ContentBlock struct {
			Type string `json:"type"`
		} `json:"content_block"`
		Delta struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"delta"`
	}
	var outer struct {
		APIMessageID string `json:"api_message_id"`
	}
	if !a.decode("stream_event", m.Event, &ev) {
		a.anomaly("bad_stream_event")
		return
	}
	_ = json.Unmarshal(line, &outer)
	key := outer.APIMessageID + ":" + strconv.Itoa(ev.Index)
	itemID := outer.APIMessageID + "_" + strconv.Itoa(ev.Index)
	switch ev.Type {
	case "content_block_start":
		b := &block{itemID: itemID, kind: ev.ContentBlock.Type}
		a.mu.Lock()
		a.blocks[key] = b
		a.mu.Unlock()
		if b.kind == "thinking" {
			a.emit(event.New(event.ItemStarted, t, event.ItemData{ItemID: itemID, Kind: event.KindReasoning, Payload: map[string]any{}}))
		}
	case "content_block_delta":
		a.mu.Lock()
		b := a.blocks[key]
		a.mu.Unlock()
		if b == nil {
			return
		}
		switch ev.Delta.Type {
		case "text_delta":
			b.text.WriteString(ev.Delta.Text)
			a.emit(event.NewMessageDelta(t, event.DeltaData{Text: ev.Delta.Text, ItemID: itemID}))
		case "thinking_delta":
			b.text.WriteString(ev.Delta.Thinking)
			a.emit(event.NewItemDelta(t, event.ItemDeltaData{ItemID: itemID, Stream: event.StreamReasoning, Text: ev.Delta.Thinking}))
		}
	case "content_block_stop":
		a.mu.Lock()
		b := a.blocks[key]
		delete(a.blocks, key)
		a.mu.Unlock()
		switch {
		case b == nil:
		case b.kind == "text":
			a.emit(event.New(event.MessageCompleted, t, event.DeltaData{Text: b.text.String(), ItemID: itemID}))
		case b.kind == "thinking":
			a.emit(event.New(event.ItemCompleted, t, event.ItemData{ItemID: itemID, Kind: event.KindReasoning,
				Status: event.ItemCompletedStatus, Payload: map[string]any{"summary": []string{}, "text": b.text.String()}}))
		}
	}
}

// onAssistant: the text and thinking of a complete assistant message were
// streamed already; its tool_use blocks open items (TodoWrite: turn.plan).
func (a *Adapter) onAssistant(m *inbound, line []byte) {
	t := a.turnID()
	if t == "" {
		return
	}
	var msg struct {
		Content []struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	if !a.decode("assistant", m.Message, &msg) {
		a.anomaly("bad_assistant_message")
		return
	}
	parent := ""
	if m.ParentToolUseID != nil {
		parent = *m.ParentToolUseID
	}
	for _, c := range msg.Content {
		if c.Type != "tool_use" || c.ID == "" {
			continue
		}
		if c.Name == "TodoWrite" {
			a.emit(event.New(event.TurnPlan, t, planOf(c.Input)))
			continue
		}
		kind := toolKind(c.Name)
		tl := &tool{id: c.ID, name: c.Name, kind: kind, parent: parent, input: c.Input, payload: payloadOf(kind, c.Name, c.Input)}
		a.mu.Lock()
		a.tools[c.ID] = tl
		a.mu.Unlock()
		raw := rawOf(c.Input)
		a.emit(event.New(event.ItemStarted, t, event.ItemData{ItemID: c.ID, Kind: kind, ParentItemID: parent,
			Title: c.Name, Payload: tl.payload, Raw: raw, RawTruncated: raw == nil && len(c.Input) > 0}))
	}
}

// onUser: tool_result blocks complete their tool's item.
func (a *Adapter) onUser(m *inbound) {
	t := a.turnID()
	if t == "" {
		return
	}
	var msg struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(m.Message, &msg)
	var blocks []struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	if json.Unmarshal(msg.Content, &blocks) != nil {
		return // the user's own text, echoed
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		a.mu.Lock()
		tl := a.tools[b.ToolUseID]
		delete(a.tools, b.ToolUseID)
		denied := a.denied[b.ToolUseID]
		a.mu.Unlock()
		if tl == nil {
			continue // TodoWrite's, or a tool this turn did not announce
		}
		status := event.ItemCompletedStatus
		switch {
		case denied:
			status = event.ItemDeclinedStatus
		case b.IsError:
			status = event.ItemFailedStatus
		}
		a.emit(event.New(event.ItemCompleted, t, tl.completed(status, resultText(b.Content), b.IsError)))
	}
}

// resultText is a tool_result's content: a string, or its text blocks.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
