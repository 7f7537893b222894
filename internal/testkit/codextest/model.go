package codextest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/modelserver"
)

// Reply is one scripted answer to a POST /v1/responses.
type Reply struct {
	// Status, when not 0 or 200, is answered as a plain HTTP error, with
	// ErrorBody as its body when set (e.g. UsageLimit's).
	Status    int
	ErrorBody string
	// Header is added to the answer.
	Header map[string]string
	// Deltas stream an assistant message, one output_text.delta each.
	Deltas []string
	// Exec, when set, is a function call of the exec_command tool asking
	// for escalated permissions: codex requests an approval before it runs.
	Exec *ExecCall
	// Stall, when set, holds the stream open after response.created until
	// it is closed (or the client goes away).
	Stall chan struct{}
	// Drop ends the stream after response.created, without
	// response.completed (a dropped connection, for codex's stream retry).
	Drop bool
}

// ExecCall is an exec_command function call.
type ExecCall struct {
	CallID string
	Cmd    string
	// Sandboxed asks for the default sandbox instead of escalated
	// permissions: codex runs it without an approval, inside its sandbox.
	Sandboxed bool
}

// UsageLimit is the 429 the responses API answers an account over its
// usage limit with (the body codex parses: error.type
// "usage_limit_reached", plan_type, resets_at in Unix seconds, and
// resets_in_seconds).
func UsageLimit(resetsAt time.Time) Reply {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"type": "usage_limit_reached", "message": "The usage limit has been reached", "plan_type": "pro",
		"resets_at": resetsAt.Unix(), "resets_in_seconds": int64(time.Until(resetsAt).Seconds())}})
	return Reply{Status: http.StatusTooManyRequests, ErrorBody: string(b)}
}

// Text is a reply streaming text in the given deltas.
func Text(deltas ...string) Reply { return Reply{Deltas: deltas} }

// Exec is a reply calling exec_command with cmd.
func Exec(callID, cmd string) Reply { return Reply{Exec: &ExecCall{CallID: callID, Cmd: cmd}} }

// Request is one recorded POST body.
type Request struct {
	Body json.RawMessage
	// Credential is the Authorization header it carried ("Bearer KEY").
	Credential string
}

// Input is the request's "input" items as raw JSON text (what the model
// sees of the conversation).
func (r Request) Input() string {
	var b struct {
		Input json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return string(b.Input)
}

// Model is a scripted responses-API server on 127.0.0.1 (URL is
// http://127.0.0.1:PORT/v1, a model provider's base_url).
type Model struct {
	*modelserver.Server[Reply]

	mu    sync.Mutex
	route func(Request) (Reply, bool)
}

// Route makes f choose the reply to each request it answers ok for,
// instead of the script (tests whose sessions run concurrently, where
// the order of requests is not theirs to choose).
func (m *Model) Route(f func(Request) (Reply, bool)) {
	m.mu.Lock()
	m.route = f
	m.mu.Unlock()
}

// NewModel starts a model server answering replies in order; once they
// are used up, every request gets Text("ok"). It stops with the test.
func NewModel(t testing.TB, replies ...Reply) *Model {
	t.Helper()
	m, err := StartModel(replies...)
	if err != nil {
		t.Fatalf("model server: %v", err)
	}
	t.Cleanup(m.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("model server: %s", m.Summary())
		}
	})
	return m
}

// Summary is how many requests the model server took and the tail of
// each one's input (what a failing test shows of the model's side).
func (m *Model) Summary() string {
	rs := m.Requests()
	var b strings.Builder
	fmt.Fprintf(&b, "%d request(s)", len(rs))
	for i, r := range rs {
		in := r.Input()
		if len(in) > 160 {
			in = "…" + in[len(in)-160:]
		}
		fmt.Fprintf(&b, "\n  request %d: input %s", i+1, in)
	}
	return b.String()
}

// StartModel is NewModel outside a test (the benchmark); Close stops it.
func StartModel(replies ...Reply) (*Model, error) {
	m := &Model{Server: modelserver.New(replies)}
	if err := m.Start("/v1", m.serve); err != nil {
		return nil, err
	}
	return m, nil
}

// Requests returns the requests received so far.
func (m *Model) Requests() []Request {
	var rs []Request
	hs := m.Headers()
	for i, b := range m.Bodies() {
		rs = append(rs, Request{Body: b, Credential: modelserver.Credential(hs[i])})
	}
	return rs
}

func (m *Model) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	rep, n := m.TakeFrom(r.Header, body, Text("ok"))
	m.mu.Lock()
	route := m.route
	m.mu.Unlock()
	if route != nil {
		if r, ok := route(Request{Body: body}); ok {
			rep = r
		}
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		body := rep.ErrorBody
		if body == "" {
			body = `{"error":{"message":"scripted failure","type":"server_error"}}`
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, body)
		return
	}
	s := modelserver.SSE{W: w}
	s.Begin()
	respID := fmt.Sprintf("resp_%d", n)
	s.Send("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": respID}})
	if rep.Drop {
		return
	}
	if rep.Stall != nil {
		select {
		case <-rep.Stall:
		case <-r.Context().Done():
			return
		}
	}
	out := 0
	if len(rep.Deltas) > 0 {
		msgID := fmt.Sprintf("msg_%d", n)
		s.Send("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": out,
			"item": map[string]any{"type": "message", "id": msgID, "role": "assistant", "content": []any{}}})
		for _, d := range rep.Deltas {
			s.Send("response.output_text.delta", map[string]any{"type": "response.output_text.delta",
				"item_id": msgID, "output_index": out, "content_index": 0, "delta": d})
		}
		s.Send("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": out,
			"item": map[string]any{"type": "message", "id": msgID, "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": strings.Join(rep.Deltas, ""), "annotations": []any{}}}}})
		out++
	}
	if rep.Exec != nil {
		call := map[string]any{"cmd": rep.Exec.Cmd, "sandbox_permissions": "require_escalated",
			"justification": "the test asks for it"}
		if rep.Exec.Sandboxed {
			call = map[string]any{"cmd": rep.Exec.Cmd}
		}
		args, _ := json.Marshal(call)
		item := map[string]any{"type": "function_call", "id": "fc_" + rep.Exec.CallID, "call_id": rep.Exec.CallID,
			"name": "exec_command", "arguments": string(args)}
		s.Send("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": out, "item": item})
		s.Send("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": out, "item": item})
	}
	s.Send("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": respID, "usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}}})
}
