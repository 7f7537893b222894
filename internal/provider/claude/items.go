package claude

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
)

// block is a content block being streamed (stream_event deltas).
type block struct {
	itemID string
	kind   string // text | thinking | other
	text   strings.Builder
}

// tool is a tool_use whose item is open until its tool_result.
type tool struct {
	id, name, kind, parent string
	input                  json.RawMessage
	payload                map[string]any
}

// toolKind maps a Claude Code tool to our item kind (PROTOCOL.md "Items").
func toolKind(name string) string {
	switch {
	case name == "Bash":
		return event.KindCommandExecution
	case name == "Edit" || name == "Write" || name == "NotebookEdit" || name == "MultiEdit":
		return event.KindFileChange
	case strings.HasPrefix(name, "mcp__"):
		return event.KindMcpToolCall
	case name == "WebSearch" || name == "WebFetch":
		return event.KindWebSearch
	case name == "Task" || name == "Agent":
		return event.KindSubagent
	case name == "ExitPlanMode":
		return event.KindPlan
	}
	return event.KindToolCall
}

// payloadOf is the item's payload from the tool's input.
func payloadOf(kind, name string, input json.RawMessage) map[string]any {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	str := func(k string) any {
		if v, ok := in[k].(string); ok {
			return v
		}
		return nil
	}
	p := map[string]any{}
	set := func(k string, v any) {
		if v != nil {
			p[k] = v
		}
	}
	switch kind {
	case event.KindCommandExecution:
		set("command", str("command"))
	case event.KindFileChange:
		path := str("file_path")
		if path == nil {
			path = str("notebook_path")
		}
		ck := "update"
		if name == "Write" {
			ck = "add"
		}
		change := map[string]any{"kind": ck}
		if path != nil {
			change["path"] = path
		}
		p["changes"] = []any{change}
	case event.KindMcpToolCall:
		parts := strings.SplitN(strings.TrimPrefix(name, "mcp__"), "__", 2)
		p["server"] = parts[0]
		if len(parts) == 2 {
			p["tool"] = parts[1]
		}
		p["arguments"] = in
	case event.KindWebSearch:
		q := str("query")
		if q == nil {
			q = str("url")
		}
		set("query", q)
	case event.KindSubagent:
		set("description", str("description"))
		set("prompt", str("prompt"))
	case event.KindPlan:
		set("text", str("plan"))
	default:
		p["name"] = name
		p["input"] = in
	}
	return p
}

// completed is the tool's item.completed with its output.
func (tl *tool) completed(status, output string, isError bool) event.ItemData {
	p := map[string]any{}
	for k, v := range tl.payload {
		p[k] = v
	}
	switch tl.kind {
	case event.KindCommandExecution:
		if len(output) > event.MaxOutputBytes {
			p["outputTruncated"] = len(output) - event.MaxOutputBytes
			output = capText(output, event.MaxOutputBytes)
		}
		p["output"] = output
	case event.KindMcpToolCall:
		if isError {
			p["error"] = output
		} else {
			p["result"] = output
		}
	case event.KindToolCall:
		if isError {
			p["error"] = output
		} else {
			p["output"] = output
		}
	}
	return event.ItemData{ItemID: tl.id, Kind: tl.kind, ParentItemID: tl.parent, Status: status, Payload: p}
}

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
	if json.Unmarshal(m.Event, &ev) != nil {
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
			a.emit(event.New(event.MessageDelta, t, event.DeltaData{Text: ev.Delta.Text, ItemID: itemID}))
		case "thinking_delta":
			b.text.WriteString(ev.Delta.Thinking)
			a.emit(event.New(event.ItemDelta, t, event.ItemDeltaData{ItemID: itemID, Stream: event.StreamReasoning, Text: ev.Delta.Thinking}))
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
	if json.Unmarshal(m.Message, &msg) != nil {
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

// planOf is turn.plan from TodoWrite's input {todos:[{content, status}]}.
func planOf(input json.RawMessage) event.TurnPlanData {
	var in struct {
		Todos []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"todos"`
	}
	_ = json.Unmarshal(input, &in)
	d := event.TurnPlanData{Steps: []event.PlanStep{}}
	for _, td := range in.Todos {
		st := map[string]string{"pending": "pending", "in_progress": "inProgress", "completed": "completed"}[td.Status]
		if st == "" {
			st = "pending"
		}
		d.Steps = append(d.Steps, event.PlanStep{Step: td.Content, Status: st})
	}
	return d
}

// takeToolsLocked removes the items still open. Needs mu.
func (a *Adapter) takeToolsLocked() []*tool {
	var out []*tool
	for id, tl := range a.tools {
		out = append(out, tl)
		delete(a.tools, id)
	}
	slices.SortFunc(out, func(x, y *tool) int { return strings.Compare(x.id, y.id) })
	return out
}

// rawOf is b as raw JSON, or nil past 64 KiB or when invalid.
func rawOf(b []byte) json.RawMessage {
	if len(b) == 0 || len(b) > event.MaxRawBytes || !json.Valid(b) {
		return nil
	}
	return json.RawMessage(append([]byte(nil), b...))
}
