// Package geminimodel is a scripted Gemini API on 127.0.0.1 (what Gemini
// CLI reaches through GOOGLE_GEMINI_BASE_URL): POST
// /v1beta/models/MODEL:streamGenerateContent?alt=sse answered with SSE
// `data:` GenerateContentResponse chunks, :generateContent answered whole,
// :countTokens. A reply streams text parts, calls one function
// (run_shell_command), or stalls mid-stream until released (the cancel
// tests). Requests that declare tools are the agent's turns and take the
// script's replies in order; a request without tools (a side call of the
// CLI's) is answered without taking one. Every request body is recorded,
// so a test can assert that a later turn's request carries the earlier
// turns. It is imported only by test support (acpagents) and _test.go
// files.
package geminimodel

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
	// Deltas stream model text, one chunk each.
	Deltas []string
	// Call, when set, is a functionCall part after the text.
	Call *FunctionCall
	// Stall, when set, holds the stream open after StallAfter of Deltas
	// until it is closed or the client goes away.
	Stall      chan struct{}
	StallAfter int
}

// FunctionCall is one function call of the reply.
type FunctionCall struct {
	Name string
	Args map[string]any
}

// Text is a reply streaming text in the given deltas.
func Text(deltas ...string) Reply { return Reply{Deltas: deltas} }

// Call is a reply calling function name with args.
func Call(name string, args map[string]any) Reply {
	return Reply{Call: &FunctionCall{Name: name, Args: args}}
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

// Contents is the request's "contents" as raw JSON text (what the model
// sees of the conversation).
func (r Request) Contents() string {
	var b struct {
		Contents json.RawMessage `json:"contents"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return string(b.Contents)
}

// Model is the scripted server; URL is http://127.0.0.1:PORT (the
// GOOGLE_GEMINI_BASE_URL).
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
	if err := m.Start("", m.serve); err != nil {
		t.Fatalf("gemini model: %v", err)
	}
	t.Cleanup(m.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gemini model: %s", m.Summary())
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
// contents (what a failing test shows of the model's side).
func (m *Model) Summary() string {
	rs := m.Requests()
	var b strings.Builder
	fmt.Fprintf(&b, "%d turn request(s), %d side request(s)", len(rs), len(m.Side()))
	for i, r := range rs {
		in := r.Contents()
		if len(in) > 200 {
			in = "…" + in[len(in)-200:]
		}
		fmt.Fprintf(&b, "\n  request %d: contents %s", i+1, in)
	}
	return b.String()
}

func (m *Model) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	switch {
	case strings.HasSuffix(r.URL.Path, ":countTokens"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"totalTokens":10}`)
		return
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"), strings.HasSuffix(r.URL.Path, ":generateContent"):
	default:
		http.NotFound(w, r)
		return
	}
	var req struct {
		Tools []json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(body, &req)
	rep := Text("ok")
	if len(req.Tools) > 0 {
		rep, _ = m.Take(body, Text("ok"))
	} else {
		m.mu.Lock()
		m.side = append(m.side, body)
		m.mu.Unlock()
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":"scripted failure","status":"INTERNAL"}}`, rep.Status)
		return
	}
	if strings.HasSuffix(r.URL.Path, ":generateContent") {
		whole(w, rep)
		return
	}
	stream(w, r, rep)
}
