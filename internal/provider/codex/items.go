package codex

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
)

// itemState is the adapter's per-turn item bookkeeping (guarded by mu).
type itemState struct {
	output map[string]int // item id -> command output bytes journaled so far
	cut    map[string]int // item id -> output bytes not journaled (over the cap)
	usage  event.TurnUsageData
	open   []event.ItemData // items started and not completed, in start order
}

func newItemState() itemState {
	return itemState{output: map[string]int{}, cut: map[string]int{}}
}

// takeOpen removes and returns the items still open, each as the
// item.completed {interrupted} that closes it.
func (s *itemState) takeOpen() []event.ItemData {
	out := s.open
	s.open = nil
	for i := range out {
		out[i].Status, out[i].Payload, out[i].Raw = event.ItemInterruptedStatus, map[string]any{}, nil
	}
	return out
}

// track notes an item started (done false) or completed.
func (s *itemState) track(d event.ItemData, done bool) {
	s.open = slices.DeleteFunc(s.open, func(o event.ItemData) bool { return o.ItemID == d.ItemID })
	if !done {
		s.open = append(s.open, d)
	}
}

func (s *itemState) reset() { *s = newItemState() }

// takeOutput returns the part of text that fits the item's output cap and
// counts the rest.
func (s *itemState) takeOutput(itemID, text string) string {
	room := event.MaxOutputBytes - s.output[itemID]
	if room <= 0 {
		s.cut[itemID] += len(text)
		return ""
	}
	if len(text) > room {
		s.cut[itemID] += len(text) - room
		text = strings.ToValidUTF8(text[:room], "")
	}
	s.output[itemID] += len(text)
	return text
}

// itemKinds maps codex ThreadItem types to item kinds. agentMessage and
// userMessage are not items (message.* and turn.started carry them); any
// type not listed is kind "other".
var itemKinds = map[string]string{
	"reasoning":           event.KindReasoning,
	"commandExecution":    event.KindCommandExecution,
	"fileChange":          event.KindFileChange,
	"mcpToolCall":         event.KindMcpToolCall,
	"webSearch":           event.KindWebSearch,
	"dynamicToolCall":     event.KindToolCall,
	"collabAgentToolCall": event.KindSubagent,
	"plan":                event.KindPlan,
	"contextCompaction":   event.KindCompaction,
}

// threadItem is the union of the ThreadItem fields the mapping reads.
type threadItem struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Text string `json:"text"`
	// reasoning (strings; a userMessage's content is objects: decoded
	// only for reasoning)
	Summary json.RawMessage `json:"summary"`
	Content json.RawMessage `json:"content"`
	// commandExecution
	Command          string          `json:"command"`
	Cwd              string          `json:"cwd"`
	ExitCode         json.RawMessage `json:"exitCode"`   // a number; anything else is no exit code
	DurationMs       json.RawMessage `json:"durationMs"` // (not a zero a damaged value would decode to)
	AggregatedOutput *string         `json:"aggregatedOutput"`
	Status           string          `json:"status"`
	// fileChange
	Changes []struct {
		Path string `json:"path"`
		Kind struct {
			Type string `json:"type"`
		} `json:"kind"`
		Diff string `json:"diff"`
	} `json:"changes"`
	// mcpToolCall, dynamicToolCall, collabAgentToolCall
	Server       string          `json:"server"`
	Tool         string          `json:"tool"`
	Arguments    json.RawMessage `json:"arguments"`
	Result       json.RawMessage `json:"result"`
	Error        json.RawMessage `json:"error"`
	ContentItems json.RawMessage `json:"contentItems"`
	Success      *bool           `json:"success"`
	Prompt       *string         `json:"prompt"`
	// webSearch
	Query string `json:"query"`
}

type itemNote struct {
	ThreadID string          `json:"threadId"`
	TurnID   string          `json:"turnId"`
	Item     json.RawMessage `json:"item"`
}

func (a *Adapter) onItemStarted(p json.RawMessage)   { a.onItem("item/started", p, false) }
func (a *Adapter) onItemCompleted(p json.RawMessage) { a.onItem("item/completed", p, true) }

func (a *Adapter) onItem(method string, p json.RawMessage, done bool) {
	var n itemNote
	if !a.params(method, p, &n) {
		return
	}
	var it threadItem
	if len(n.Item) == 0 {
		a.anomaly("bad_item", "method", method, "err", "no item")
		return
	}
	if !a.decode(method+" item", n.Item, &it) {
		return
	}
	switch it.Type {
	case "userMessage":
		return // turn.started carries the user's text
	case "agentMessage":
		if done {
			if t, ok := a.resolveTurn(n.ThreadID, n.TurnID); ok {
				a.emit(event.New(event.MessageCompleted, t.ours, event.DeltaData{Text: it.Text, ItemID: it.ID, ProviderTurnID: t.provider}))
			}
		}
		return
	}
	t, ok := a.resolveTurn(n.ThreadID, n.TurnID)
	if !ok {
		return
	}
	kind := itemKinds[it.Type]
	if kind == "" {
		kind = event.KindOther
	}
	d := event.ItemData{ItemID: it.ID, Kind: kind, Title: capText(itemTitle(kind, &it), 200), ProviderTurnID: t.provider}
	if len(n.Item) > event.MaxRawBytes {
		d.RawTruncated = true
	} else {
		d.Raw = n.Item
	}
	typ := event.ItemStarted
	if done {
		typ = event.ItemCompleted
		d.Status = itemStatus(&it)
		a.mu.Lock()
		cut := a.items.cut[it.ID]
		delete(a.items.output, it.ID)
		delete(a.items.cut, it.ID)
		a.items.track(d, true)
		a.mu.Unlock()
		d.Payload = itemPayload(kind, &it, cut)
	} else {
		d.Payload = itemPayload(kind, &it, 0)
		a.mu.Lock()
		a.items.track(d, false)
		a.mu.Unlock()
	}
	a.emit(event.New(typ, t.ours, d))
}

// itemStatus maps codex's status (absent for reasoning, plan, …) to
// item.completed's.
func itemStatus(it *threadItem) string {
	switch it.Status {
	case "failed":
		return event.ItemFailedStatus
	case "declined":
		return event.ItemDeclinedStatus
	case "inProgress", "interrupted":
		return event.ItemInterruptedStatus
	}
	if it.Success != nil && !*it.Success {
		return event.ItemFailedStatus
	}
	return event.ItemCompletedStatus
}

// itemPayload is the kind's payload (PROTOCOL.md's table); cut is output
// the adapter did not journal as deltas.
func itemPayload(kind string, it *threadItem, cut int) any {
	switch kind {
	case event.KindReasoning:
		var summary, content []string
		_ = json.Unmarshal(it.Summary, &summary)
		_ = json.Unmarshal(it.Content, &content)
		return map[string]any{"summary": nonNil(summary), "text": strings.Join(content, "\n")}
	case event.KindCommandExecution:
		p := map[string]any{"command": it.Command, "cwd": it.Cwd}
		if n, ok := integer(it.ExitCode); ok {
			p["exitCode"] = n
		}
		if n, ok := integer(it.DurationMs); ok {
			p["durationMs"] = n
		}
		if it.AggregatedOutput != nil {
			out := *it.AggregatedOutput
			truncated := cut
			if len(out) > event.MaxOutputBytes {
				truncated = max(truncated, len(out)-event.MaxOutputBytes)
				out = strings.ToValidUTF8(out[:event.MaxOutputBytes], "")
			}
			p["output"], p["outputTruncated"] = out, truncated
		}
		return p
	case event.KindFileChange:
		changes := make([]map[string]any, 0, len(it.Changes))
		for _, c := range it.Changes {
			changes = append(changes, map[string]any{"path": c.Path, "kind": c.Kind.Type, "diff": c.Diff})
		}
		return map[string]any{"changes": changes}
	case event.KindMcpToolCall:
		return omitEmpty(map[string]any{"server": it.Server, "tool": it.Tool, "arguments": it.Arguments, "result": it.Result, "error": it.Error})
	case event.KindWebSearch:
		return map[string]any{"query": it.Query}
	case event.KindToolCall:
		return omitEmpty(map[string]any{"name": it.Tool, "input": it.Arguments, "output": it.ContentItems})
	case event.KindSubagent:
		p := map[string]any{"description": it.Tool}
		if it.Prompt != nil {
			p["prompt"] = *it.Prompt
		}
		return p
	case event.KindPlan:
		return map[string]any{"text": it.Text}
	case event.KindCompaction:
		return map[string]any{}
	}
	return map[string]any{"providerType": it.Type}
}

// itemTitle is a one-line description for a person.
func itemTitle(kind string, it *threadItem) string {
	switch kind {
	case event.KindCommandExecution:
		return it.Command
	case event.KindFileChange:
		paths := make([]string, 0, len(it.Changes))
		for _, c := range it.Changes {
			paths = append(paths, c.Path)
		}
		return fmt.Sprintf("%d file(s): %s", len(paths), strings.Join(paths, ", "))
	case event.KindMcpToolCall:
		return it.Server + "." + it.Tool
	case event.KindWebSearch:
		return it.Query
	case event.KindToolCall, event.KindSubagent:
		return it.Tool
	case event.KindOther:
		return it.Type
	}
	return kind
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// omitEmpty drops absent or null raw values.
func omitEmpty(m map[string]any) map[string]any {
	for k, v := range m {
		if r, ok := v.(json.RawMessage); ok && (len(r) == 0 || string(r) == "null") {
			delete(m, k)
		}
	}
	return m
}

// integer is raw as an integer; false when absent, null or no integer.
func integer(raw json.RawMessage) (int64, bool) {
	var n int64
	if len(raw) == 0 || raw[0] == '"' || string(raw) == "null" || json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	return n, true
}
