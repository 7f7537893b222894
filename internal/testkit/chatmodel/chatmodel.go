// Package chatmodel is a scripted OpenAI Chat Completions API on 127.0.0.1
// (POST …/chat/completions with stream:true, answered with SSE `data:`
// chunks and `data: [DONE]`), the model the ACP agents that speak it are
// pointed at in tests: Copilot CLI (BYOK), Qwen Code, and opencode's
// `@ai-sdk/openai-compatible` provider. A reply streams text deltas, calls
// one function tool (each agent's shell tool), or stalls mid-stream until
// released (the cancel tests). Requests that offer tools are the agent's
// turns and take the script's replies in order; a request without tools
// (opencode's title generation, any other side call) is answered "ok"
// without taking one. Every request body is recorded, so a test can assert
// that a later turn's request carries the earlier turns. It is imported
// only by test support (acpagents) and _test.go files.
package chatmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/modelserver"
)

// Reply is one scripted answer to a turn's request.
type Reply struct {
	// Status, when not 0 or 200, is answered as an HTTP error.
	Status int
	// Deltas stream assistant text, one chunk each.
	Deltas []string
	// Tool, when set, is a function call after the text: the chunk stream
	// ends with finish_reason tool_calls.
	Tool *ToolCall
	// Stall, when set, holds the stream open after StallAfter of Deltas
	// until it is closed or the client goes away.
	Stall      chan struct{}
	StallAfter int
}

// ToolCall is one function call of the reply.
type ToolCall struct {
	ID   string
	Name string
	Args map[string]any
}

// Text is a reply streaming text in the given deltas.
func Text(deltas ...string) Reply { return Reply{Deltas: deltas} }

// Call is a reply calling tool name with args.
func Call(id, name string, args map[string]any) Reply {
	return Reply{Tool: &ToolCall{ID: id, Name: name, Args: args}}
}

// Stalled is a reply streaming first, then holding the stream open until
// release is closed.
func Stalled(release chan struct{}, first string) Reply {
	return Reply{Deltas: []string{first, " never"}, Stall: release, StallAfter: 1}
}

// Request is one recorded request body.
type Request struct {
	Body json.RawMessage
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

// Model is the scripted server; URL is http://127.0.0.1:PORT/v1 (the base
// URL the agents are given).
type Model struct {
	*modelserver.Server[Reply]

	mu   sync.Mutex
	side []json.RawMessage
}

// New starts a model answering replies in order (Text("ok") once they are
// used up). It stops with the test; a failing test logs its requests.
func New(t testing.TB, replies ...Reply) *Model {
	t.Helper()
	m := &Model{Server: modelserver.New(replies)}
	if err := m.Start("/v1", m.serve); err != nil {
		t.Fatalf("chat model: %v", err)
	}
	t.Cleanup(m.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chat model: %s", m.Summary())
		}
	})
	return m
}

// Requests returns the turn requests (those that took a reply) so far.
func (m *Model) Requests() []Request {
	var rs []Request
	for _, b := range m.Bodies() {
		rs = append(rs, Request{Body: b})
	}
	return rs
}

// Side returns the requests without tools answered so far.
func (m *Model) Side() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rs []Request
	for _, b := range m.side {
		rs = append(rs, Request{Body: b})
	}
	return rs
}

// Summary is how many requests the model took and the tail of each one's
// messages (what a failing test shows of the model's side).
func (m *Model) Summary() string {
	rs := m.Requests()
	var b strings.Builder
	fmt.Fprintf(&b, "%d turn request(s), %d side request(s)", len(rs), len(m.Side()))
	for i, r := range rs {
		in := r.Messages()
		if len(in) > 200 {
			in = "…" + in[len(in)-200:]
		}
		fmt.Fprintf(&b, "\n  request %d: messages %s", i+1, in)
	}
	return b.String()
}

type request struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Tools  []json.RawMessage `json:"tools"`
}

func (m *Model) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"mock-model","object":"model","created":0,"owned_by":"test"}]}`)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req request
	_ = json.Unmarshal(body, &req)
	if req.Model == "" {
		req.Model = "mock-model"
	}
	rep := Text("ok")
	n := 0
	if len(req.Tools) > 0 {
		rep, n = m.Take(body, Text("ok"))
	} else {
		m.mu.Lock()
		m.side = append(m.side, body)
		n = -len(m.side)
		m.mu.Unlock()
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		fmt.Fprint(w, `{"error":{"message":"scripted failure","type":"server_error"}}`)
		return
	}
	id := fmt.Sprintf("chatcmpl-%d", n)
	if !req.Stream {
		whole(w, id, req.Model, rep)
		return
	}
	stream(w, r, id, req.Model, rep)
}
