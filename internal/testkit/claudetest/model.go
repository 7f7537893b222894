package claudetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/modelserver"
)

// Reply is one scripted answer to a streaming POST /v1/messages.
type Reply struct {
	// Status, when not 0 or 200, is answered as an HTTP error (529:
	// overloaded, 429: rate limit, else api error) of ErrorType when set.
	Status int
	// ErrorType and ErrorMessage, with Status, are the error body's
	// error.type and error.message.
	ErrorType, ErrorMessage string
	// Header is added to the answer (e.g. retry-after, or the
	// anthropic-ratelimit-* headers of a limited account).
	Header map[string]string
	// Thinking, when set, is streamed first as a thinking block.
	Thinking []string
	// Deltas stream a text block, one text_delta each.
	Deltas []string
	// Tool, when set, is a tool_use block after the text: the message
	// stops with stop_reason tool_use.
	Tool *ToolUse
	// Stall, when set, holds the stream open after message_start until it
	// is closed (or the client goes away).
	Stall chan struct{}
	// StallAfter moves the stall after that many of Deltas (their text
	// block open).
	StallAfter int
}

// ToolUse is a tool_use block.
type ToolUse struct {
	ID    string
	Name  string
	Input map[string]any
}

// Text is a reply streaming text in the given deltas.
func Text(deltas ...string) Reply { return Reply{Deltas: deltas} }

// Bash is a reply calling the Bash tool with command.
func Bash(id, command string) Reply {
	return Reply{Tool: &ToolUse{ID: id, Name: "Bash", Input: map[string]any{"command": command, "description": "test command"}}}
}

// Tool is a reply calling tool name with input.
func Tool(id, name string, input map[string]any) Reply {
	return Reply{Tool: &ToolUse{ID: id, Name: name, Input: input}}
}

// Request is one recorded streaming POST body.
type Request struct {
	Body json.RawMessage
	// Credential is the API key it carried (x-api-key, or Authorization).
	Credential string
}

// Messages is the request's "messages" as raw JSON text (what the model
// sees of the conversation).
func (r Request) Messages() string {
	var b struct {
		Messages json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return string(b.Messages)
}

// Model is a scripted Messages API server on 127.0.0.1 (URL is
// ANTHROPIC_BASE_URL). Streaming requests take the script's replies in
// order (Text("ok") once it is used up); a request without stream:true (the
// CLI's side calls) gets a short JSON message and takes nothing from the
// script: Requests and Arrived count the streaming ones only.
type Model struct {
	*modelserver.Server[Reply]
}

// NewModel starts a model server answering replies in order. It stops
// with the test.
func NewModel(t testing.TB, replies ...Reply) *Model {
	t.Helper()
	m, err := StartModel(replies...)
	if err != nil {
		t.Fatalf("model server: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

// StartModel is NewModel outside a test (the benchmark); Close stops it.
func StartModel(replies ...Reply) (*Model, error) {
	m := &Model{modelserver.New(replies)}
	if err := m.Start("", m.serve); err != nil {
		return nil, err
	}
	return m, nil
}

// Requests returns the streaming requests received so far.
func (m *Model) Requests() []Request {
	var rs []Request
	hs := m.Headers()
	for i, b := range m.Bodies() {
		rs = append(rs, Request{Body: b, Credential: modelserver.Credential(hs[i])})
	}
	return rs
}

func (m *Model) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Stream bool   `json:"stream"`
		Model  string `json:"model"`
	}
	_ = json.Unmarshal(body, &req)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_side", "type": "message", "role": "assistant",
			"model": req.Model, "content": []any{map[string]any{"type": "text", "text": "ok"}},
			"stop_reason": "end_turn", "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}})
		return
	}
	rep, n := m.TakeFrom(r.Header, body, Text("ok"))
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		typ, msg := rep.ErrorType, rep.ErrorMessage
		switch {
		case typ != "":
		case rep.Status == 529:
			typ = "overloaded_error"
		case rep.Status == http.StatusTooManyRequests:
			typ = "rate_limit_error"
		default:
			typ = "api_error"
		}
		if msg == "" {
			msg = "scripted failure"
		}
		w.WriteHeader(rep.Status)
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
		_, _ = w.Write(b)
		return
	}
	s := modelserver.SSE{W: w}
	s.Begin()
	s.Send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 2}}})
	stall := func() bool {
		select {
		case <-rep.Stall:
			return true
		case <-r.Context().Done():
			return false
		}
	}
	if rep.Stall != nil && rep.StallAfter == 0 && !stall() {
		return
	}
	idx := 0
	block := func(start map[string]any, deltas []map[string]any, stallAfter int) bool {
		s.Send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": start})
		for i, d := range deltas {
			if i == stallAfter && rep.Stall != nil && !stall() {
				return false
			}
			s.Send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": d})
		}
		s.Send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
		return true
	}
	if len(rep.Thinking) > 0 {
		var ds []map[string]any
		for _, t := range rep.Thinking {
			ds = append(ds, map[string]any{"type": "thinking_delta", "thinking": t})
		}
		ds = append(ds, map[string]any{"type": "signature_delta", "signature": "c2lnbmF0dXJl"})
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, ds, -1)
	}
	if len(rep.Deltas) > 0 {
		var ds []map[string]any
		for _, t := range rep.Deltas {
			ds = append(ds, map[string]any{"type": "text_delta", "text": t})
		}
		at := -1 // no stall inside the block
		if rep.StallAfter > 0 {
			at = rep.StallAfter
		}
		if !block(map[string]any{"type": "text", "text": ""}, ds, at) {
			return
		}
	}
	stop := "end_turn"
	if rep.Tool != nil {
		in, _ := json.Marshal(rep.Tool.Input)
		block(map[string]any{"type": "tool_use", "id": rep.Tool.ID, "name": rep.Tool.Name, "input": map[string]any{}},
			[]map[string]any{{"type": "input_json_delta", "partial_json": string(in)}}, -1)
		stop = "tool_use"
	}
	s.Send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	s.Send("message_stop", map[string]any{"type": "message_stop"})
}
