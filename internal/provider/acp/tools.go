package acp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
)

// tool is an open tool call of the turn (one item).
type tool struct {
	id, acpKind, kind, title string
	status                   string
	rawInput                 json.RawMessage
	rawOut                   *string          // rawOutput's output text, when it has one (kept whole until payload caps it)
	exit                     *int             // rawOutput's exit code
	diffs                    []map[string]any // the file changes of its diff content (each diff capped)
	contentOut               string           // the text content of the call once it runs (not while pending; capped)
	locations                []struct {
		Path string `json:"path"`
	}
	output    string // what the item has streamed so far (capped)
	truncated int    // bytes of its content output past the cap
	denied    bool
	raw       json.RawMessage
}

// toolContent is one entry of a tool call's content.
type toolContent struct {
	Type    string `json:"type"`
	Content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Path    string  `json:"path"`
	OldText *string `json:"oldText"`
	NewText string  `json:"newText"`
}

// toolUpdate is a tool_call or tool_call_update (every field optional in
// an update: a field present replaces the one before).
type toolUpdate struct {
	ToolCallID string          `json:"toolCallId"`
	Title      *string         `json:"title"`
	Kind       *string         `json:"kind"`
	Status     *string         `json:"status"`
	Content    []toolContent   `json:"content"`
	RawInput   json.RawMessage `json:"rawInput"`
	RawOutput  json.RawMessage `json:"rawOutput"`
	Locations  []struct {
		Path string `json:"path"`
	} `json:"locations"`
}

// onToolCall: a tool_call opens an item of the kind its ToolKind maps to
// (an update of a call never announced opens it too); a status completed
// or failed completes it (declined when its permission was denied).
func (a *Adapter) onToolCall(t *openTurn, u json.RawMessage) []event.Draft {
	var up toolUpdate
	_, _ = decodeLenient(u, &up)
	if up.ToolCallID == "" {
		a.anomalyLocked("tool_call_without_id")
		return nil
	}
	up.ToolCallID = toolKey(up.ToolCallID)
	ds := append(closeThought(t), closeMessage(t)...)
	tl := t.tools[up.ToolCallID]
	fresh := tl == nil
	if fresh {
		if len(t.tools) >= maxOpenTools {
			a.anomalyLocked("too_many_open_tool_calls", "max", maxOpenTools)
			return ds
		}
		if t.toolBytes >= maxTurnToolBytes {
			a.anomalyLocked("open_tool_calls_over_budget", "max_bytes", maxTurnToolBytes)
			return ds
		}
		tl = &tool{id: up.ToolCallID}
		t.tools[tl.id] = tl
		t.toolOrder = append(t.toolOrder, tl.id)
	}
	before := 0 // a fresh call's bytes are all new
	if !fresh {
		before = tl.size()
	}
	prev := *tl // merge replaces fields, never changes them in place
	tl.merge(&up)
	if r := rawOf(u); r != nil {
		tl.raw = r
	}
	if fresh {
		tl.kind = itemKind(tl.acpKind)
	}
	delta := ""
	if out := tl.contentOut; tl.kind == event.KindCommandExecution && strings.HasPrefix(out, tl.output) && len(out) > len(tl.output) {
		delta, tl.output = out[len(tl.output):], out
	}
	if grown := tl.size() - before; grown > 0 && t.toolBytes+grown > maxTurnToolBytes {
		// The turn's budget holds for what an update adds too: a call past
		// it is not opened; an open one keeps what it had, and only its
		// status moves on (its completion is still journaled).
		a.anomalyLocked("open_tool_calls_over_budget", "max_bytes", maxTurnToolBytes, "tool_call_id", capText(tl.id, 60))
		if fresh {
			delete(t.tools, tl.id)
			t.toolOrder = t.toolOrder[:len(t.toolOrder)-1]
			return ds
		}
		status := tl.status
		*tl = prev
		tl.status, delta = status, ""
	}
	t.toolBytes += tl.size() - before
	if fresh {
		ds = append(ds, event.New(event.ItemStarted, t.ours, event.ItemData{ItemID: tl.id, Kind: tl.kind, Title: tl.title,
			Payload: tl.payload(), Raw: tl.raw}))
	}
	if delta != "" {
		ds = append(ds, event.NewItemDelta(t.ours, event.ItemDeltaData{ItemID: tl.id, Stream: event.StreamOutput, Text: delta}))
	}
	switch tl.status {
	case "completed", "failed":
		st := event.ItemCompletedStatus
		switch {
		case tl.denied:
			st = event.ItemDeclinedStatus
		case tl.status == "failed":
			st = event.ItemFailedStatus
		}
		// A completed call is dropped from the turn: what it holds stays
		// bounded by the calls open (maxOpenTools), never those seen.
		delete(t.tools, tl.id)
		t.toolBytes -= tl.size()
		t.toolOrder = slices.DeleteFunc(t.toolOrder, func(id string) bool { return id == tl.id })
		ds = append(ds, event.New(event.ItemCompleted, t.ours, tl.completed(st)))
	}
	return ds
}

// maxToolID is the longest toolCallId kept as is (as an itemId); a longer
// one is named "h" + a digest of it, as a long request id is
// (provider.MaxRequestKeyID): an agent's id is unbounded, and the itemId
// is copied into every event of the call and held while it is open.
const maxToolID = 128

func toolKey(id string) string {
	if len(id) <= maxToolID {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h" + hex.EncodeToString(sum[:16])
}

// maxTurnToolBytes bounds the bytes a turn's open tool calls hold (each
// field capped on its own): no call opens past it and no update grows an
// open one past it (dropped, logged).
var maxTurnToolBytes = 64 << 20

// size is about the bytes tl holds.
func (tl *tool) size() int {
	n := len(tl.id) + len(tl.acpKind) + len(tl.kind) + len(tl.title) + len(tl.status) + len(tl.rawInput) +
		len(tl.contentOut) + len(tl.output) + len(tl.raw)
	if tl.rawOut != nil {
		n += len(*tl.rawOut)
	}
	for _, d := range tl.diffs {
		for _, v := range d {
			if s, ok := v.(string); ok {
				n += len(s)
			}
		}
	}
	for _, l := range tl.locations {
		n += len(l.Path)
	}
	return n
}

// maxOpenTools bounds the tool calls one turn keeps open (a flood of
// fresh ids is dropped past it, logged once).
const maxOpenTools = 4096

func (tl *tool) merge(up *toolUpdate) {
	if up.Title != nil {
		tl.title = capText(*up.Title, 4096)
	}
	if up.Kind != nil {
		tl.acpKind = *up.Kind
	}
	if up.Status != nil {
		tl.status = *up.Status
	}
	if up.Content != nil {
		// Only what the item shows is kept, capped: memory held for an
		// agent is bounded in bytes.
		tl.diffs = tl.diffChanges(up.Content)
		if tl.status != "" && tl.status != "pending" {
			// A pending call's content describes what it would do (codex-acp
			// puts its permission prompt there): no output yet.
			full := contentText(up.Content)
			tl.contentOut = capText(full, event.MaxOutputBytes)
			tl.truncated = len(full) - len(tl.contentOut)
		}
	}
	if len(up.RawInput) > 0 && len(up.RawInput) <= event.MaxRawBytes {
		tl.rawInput = validUTF8(append(json.RawMessage(nil), up.RawInput...))
	}
	if len(up.RawOutput) > 0 && string(up.RawOutput) != "null" {
		// Read as it comes (it may be far larger than a raw is kept):
		// its output text, capped with the excess counted, and exit code.
		var s string
		if json.Unmarshal(up.RawOutput, &s) == nil {
			tl.rawOut = &s
		} else if out, ok := stringField(up.RawOutput, "formatted_output", "aggregated_output", "output", "stdout"); ok {
			tl.rawOut = &out
		}
		if tl.rawOut != nil && len(*tl.rawOut) > event.MaxOutputBytes {
			full := *tl.rawOut
			capped := capText(full, event.MaxOutputBytes)
			tl.rawOut, tl.truncated = &capped, len(full)-len(capped)
		}
		if code, ok := exitCode(up.RawOutput); ok {
			tl.exit = &code
		}
	}
	if up.Locations != nil {
		tl.locations = up.Locations[:min(len(up.Locations), maxFileChanges)]
		for i := range tl.locations {
			tl.locations[i].Path = capText(tl.locations[i].Path, 4096)
		}
	}
}

// itemKind is the item kind of an ACP ToolKind.
func itemKind(acpKind string) string {
	if k, ok := toolKinds[acpKind]; ok {
		return k
	}
	return event.KindToolCall
}

// completed is the item.completed of tl with status.
func (tl *tool) completed(status string) event.ItemData {
	return event.ItemData{ItemID: tl.id, Kind: tl.kind, Title: tl.title, Status: status, Payload: tl.payload(), Raw: tl.raw}
}

// payload is the item's payload of its kind (PROTOCOL.md "Items").
func (tl *tool) payload() map[string]any {
	switch tl.kind {
	case event.KindCommandExecution:
		p := map[string]any{"command": tl.command(), "output": tl.outputText(), "outputTruncated": tl.truncated}
		if cwd, _ := stringField(tl.rawInput, "cwd", "workdir"); cwd != "" {
			p["cwd"] = cwd
		}
		if tl.exit != nil {
			p["exitCode"] = *tl.exit
		}
		return p
	case event.KindFileChange:
		return map[string]any{"changes": tl.changes()}
	}
	p := map[string]any{"name": tl.title}
	if len(tl.rawInput) > 0 {
		p["input"] = tl.rawInput
	}
	if out := tl.outputText(); out != "" {
		p["output"] = capText(out, event.MaxOutputBytes)
		if tl.status == "failed" {
			p["error"] = capText(out, 4096)
		}
	}
	return p
}

// command is a commandExecution's command line: rawInput's command (a
// string, or an argv whose `sh -c` script is the last word), else the title.
func (tl *tool) command() string {
	var in struct {
		Command json.RawMessage `json:"command"`
		Cmd     json.RawMessage `json:"cmd"`
	}
	_ = json.Unmarshal(tl.rawInput, &in)
	for _, raw := range []json.RawMessage{in.Command, in.Cmd} {
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
		var argv []string
		if json.Unmarshal(raw, &argv) == nil && len(argv) > 0 {
			if len(argv) == 3 && (argv[1] == "-c" || argv[1] == "-lc") {
				return argv[2]
			}
			return strings.Join(argv, " ")
		}
	}
	return tl.title
}

// outputText is the call's output: rawOutput's (a string, or an object's
// formatted_output / aggregated_output / output / stdout, even when
// empty) when the agent sent one, else the text content it sent while
// the call ran. Both are capped at event.MaxOutputBytes.
func (tl *tool) outputText() string {
	if tl.rawOut != nil {
		return *tl.rawOut
	}
	return tl.contentOut
}

// contentText is the text of a tool call's content entries.
func contentText(cs []toolContent) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Type == "content" && c.Content.Type == "text" {
			b.WriteString(c.Content.Text)
		}
	}
	return b.String()
}

// changes is a fileChange's list: its diff content, else its locations.
func (tl *tool) changes() []map[string]any {
	if len(tl.diffs) > 0 {
		return tl.diffs
	}
	kind := "update"
	if tl.acpKind == "delete" {
		kind = "delete"
	}
	out := []map[string]any{}
	for _, l := range tl.locations {
		if l.Path != "" {
			out = append(out, map[string]any{"path": l.Path, "kind": kind})
		}
	}
	return out
}

// maxFileChanges bounds a fileChange's changes (its diff entries, else its
// locations): the first ones are kept.
const maxFileChanges = 256

// diffChanges is the file changes of a content list's diff entries (the
// first maxFileChanges).
func (tl *tool) diffChanges(cs []toolContent) []map[string]any {
	var out []map[string]any
	for _, c := range cs {
		if c.Type != "diff" || c.Path == "" || len(out) == maxFileChanges {
			continue
		}
		kind := "update"
		switch {
		case tl.acpKind == "delete":
			kind = "delete"
		case c.OldText == nil:
			kind = "add"
		}
		old := ""
		if c.OldText != nil {
			old = *c.OldText
		}
		out = append(out, map[string]any{"path": capText(c.Path, 4096), "kind": kind, "diff": capText(lineDiff(c.Path, old, c.NewText), event.MaxOutputBytes)})
	}
	return out
}

// lineDiff is a whole-file diff of old -> new (every old line removed,
// every new line added): ACP sends both texts, not a patch.
func lineDiff(path, old, new string) string {
	var b strings.Builder
	b.WriteString("--- a/" + strings.TrimPrefix(path, "/") + "\n+++ b/" + strings.TrimPrefix(path, "/") + "\n")
	for _, l := range splitLines(old) {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range splitLines(new) {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// stringField is the first of keys that is a non-empty string field of
// obj, else the first that is a string field at all (ok false: none).
func stringField(obj json.RawMessage, keys ...string) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return "", false
	}
	found := false
	for _, k := range keys {
		var s string
		if json.Unmarshal(m[k], &s) == nil {
			if s != "" {
				return s, true
			}
			found = true
		}
	}
	return "", found
}

// exitCode is rawOutput's exit_code / exitCode, when it has one.
func exitCode(obj json.RawMessage) (int, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return 0, false
	}
	for _, k := range []string{"exit_code", "exitCode"} {
		var n int
		if json.Unmarshal(m[k], &n) == nil && len(m[k]) > 0 {
			return n, true
		}
	}
	return 0, false
}
