package claude

import (
	"encoding/json"
	"slices"
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
