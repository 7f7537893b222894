package rpc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
)

// TestFramingFaults: each closes the connection with one log line naming
// the reason, and another client is served meanwhile.
func TestFramingFaults(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	big := strings.Repeat("x", 5000)
	tests := []struct {
		name   string
		f      Framing
		init   bool // initialize first
		input  string
		halfCl bool // close our write side after input
		reason string
	}{
		{"junk", FramingLines, false, "hello there\n", false, "bad_framing"},
		{"junk after blanks", FramingLines, false, " \r\n\t%%%", false, "bad_framing"},
		{"batch first", FramingLines, false, `[{"jsonrpc":"2.0","id":1,"method":"initialize"}]` + "\n", false, "batch_not_supported"},
		{"truncated line", FramingLines, true, `{"jsonrpc":"2.0","id":1,"meth`, true, "truncated_frame"},
		{"truncated body", FramingHeader, true, "Content-Length: 100\r\n\r\n{\"jsonrpc\"", true, "truncated_frame"},
		{"truncated header", FramingHeader, true, "Content-Length: 10\r\nContent-Ty", true, "truncated_frame"},
		{"absurd content-length", FramingHeader, true, "Content-Length: 99999999999999\r\n\r\n", false, "message_too_large"},
		{"header over limit", FramingHeader, true, "Content-Length: 4097\r\n\r\n", false, "message_too_large"},
		{"line over limit, no newline", FramingLines, true, `{"jsonrpc":"2.0","id":1,"method":"x","params":"` + big, false, "message_too_large"},
		{"bad content-length", FramingHeader, true, "Content-Length: ten\r\n\r\n", false, "bad_header"},
		{"conflicting content-length", FramingHeader, true, "Content-Length: 2\r\ncontent-length: 50\r\n\r\n{}", false, "bad_header"},
		{"no content-length", FramingHeader, true, "Content-Type: x\r\n\r\n{}", false, "bad_header"},
		{"header without colon", FramingHeader, true, "Content-Length 10\r\n\r\n", false, "bad_header"},
		{"malformed json line", FramingLines, true, `{"jsonrpc":"2.0",,}` + "\n", false, "malformed_json"},
		{"malformed json body", FramingHeader, true, "Content-Length: 5\r\n\r\n{oops", false, "malformed_json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.logs.count("closing connection")
			beforeReason := ts.logs.count("closing connection", "reason="+tc.reason)
			r := ts.raw(t, tc.f)
			if tc.init {
				r.initialize()
			}
			r.write(tc.input)
			if tc.halfCl {
				r.nc.(interface{ CloseWrite() error }).CloseWrite()
			}
			r.expectClosed()
			ts.logs.waitFor(t, beforeReason+1, "closing connection", "reason="+tc.reason)
			if n := ts.logs.count("closing connection"); n != before+1 {
				t.Fatalf("fault logged %d times, want once", n-before)
			}
			// every other client is still served
			c := ts.client(t, tc.f, nil, false)
			var st Status
			if err := call(t, c, "daemon.status", nil, &st); err != nil || st.PID == 0 {
				t.Fatalf("status after fault: %+v %v", st, err)
			}
		})
	}
}

// TestBatchLater: a batch after the first message answers -32600
// batch_not_supported and the connection goes on.
func TestBatchLater(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			r := ts.raw(t, f)
			r.initialize()
			r.send(`[{"jsonrpc":"2.0","id":7,"method":"daemon.status"}]`)
			m := r.recv()
			e, _ := m["error"].(map[string]any)
			if e == nil || e["code"].(float64) != -32600 || e["data"].(map[string]any)["reason"] != "batch_not_supported" || m["id"] != nil {
				t.Fatalf("got %v, want -32600 batch_not_supported with id null", m)
			}
			r.send(`{"jsonrpc":"2.0","id":8,"method":"daemon.status"}`)
			if m := r.recv(); m["result"] == nil || m["id"].(float64) != 8 {
				t.Fatalf("after batch: %v", m)
			}
		})
	}
}

// TestTolerantHeaders: lower-case names, "\n" line ends, Content-Type and
// unknown headers are accepted; answers come in header framing.
func TestTolerantHeaders(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	r := ts.raw(t, FramingHeader)
	msg := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`
	r.write(fmt.Sprintf("\r\ncontent-length: %d\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\nX-Other: 1\n\n%s", len(msg), msg))
	if m := r.recv(); m["result"] == nil {
		t.Fatalf("got %v", m)
	}
	// vscode-jsonrpc writes the header and the body in separate writes
	msg = `{"jsonrpc":"2.0","id":2,"method":"daemon.status"}`
	r.write(fmt.Sprintf("Content-Length: %d\r\n\r\n", len(msg)))
	r.write(msg)
	if m := r.recv(); m["result"] == nil || m["id"] != 2.0 {
		t.Fatalf("split header/body: %v", m)
	}
	// the same Content-Length twice is not a conflict
	msg = `{"jsonrpc":"2.0","id":3,"method":"daemon.status"}`
	r.write(fmt.Sprintf("Content-Length: %d\r\ncontent-length:%d\r\n\r\n%s", len(msg), len(msg), msg))
	if m := r.recv(); m["result"] == nil || m["id"] != 3.0 {
		t.Fatalf("duplicate identical Content-Length: %v", m)
	}
	r.write("CONTENT-LENGTH:2\r\n\r\n{}")
	if m := r.recv(); m["error"] == nil { // {} is neither request nor response: -32600
		t.Fatalf("{}: %v", m)
	}
	r.write("CONTENT-LENGTH:2\r\n\r\n{x")
	r.expectClosed() // malformed
}

// TestRequestErrors: each bad request gets the error PROTOCOL.md names,
// in both framings, and the connection keeps serving.
func TestRequestErrors(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	ts.fake.panicOn = "create"
	dir := t.TempDir()
	type tc struct {
		name, method string
		params       any
		code         int64
		reason       string
		data         map[string]any
	}
	preInit := []tc{
		{"call before initialize", "daemon.status", nil, -32002, "not_initialized", nil},
		{"unknown before initialize", "no.such", nil, -32002, "not_initialized", nil},
		{"unsupported protocol", "initialize", map[string]any{"protocolVersion": 2}, -32003, "unsupported_protocol", map[string]any{"supported": []any{1.0}}},
		{"initialize without version", "initialize", map[string]any{}, -32602, "invalid_params", map[string]any{"field": "protocolVersion"}},
		{"initialize wrong type", "initialize", map[string]any{"protocolVersion": "1"}, -32602, "invalid_params", map[string]any{"field": "protocolVersion"}},
	}
	postInit := []tc{
		{"second initialize", "initialize", map[string]any{"protocolVersion": 1}, -32600, "already_initialized", nil},
		{"unknown method", "agentSession.frobnicate", nil, -32601, "method_not_found", nil},
		{"wrong param type", "agentSession.get", map[string]any{"sessionId": 5}, -32602, "invalid_params", map[string]any{"field": "sessionId"}},
		{"params not an object", "agentSession.get", []any{"s_aaaaaaaa"}, -32602, "invalid_params", map[string]any{"field": "params"}},
		{"id like a path", "agentSession.get", map[string]any{"sessionId": "../../x"}, -32602, "invalid_params", map[string]any{"field": "sessionId"}},
		{"missing id", "agentSession.get", map[string]any{}, -32602, "invalid_params", map[string]any{"field": "sessionId"}},
		{"relative cwd", "agentSession.create", map[string]any{"provider": "echo", "cwd": "rel/dir"}, -32602, "invalid_params", map[string]any{"field": "cwd"}},
		{"missing cwd dir", "agentSession.create", map[string]any{"provider": "echo", "cwd": dir + "/none"}, -32602, "invalid_params", map[string]any{"field": "cwd"}},
		{"unknown session", "agentSession.get", map[string]any{"sessionId": "s_zzzzzzzz"}, -32010, "session_not_found", nil},
		{"unknown provider", "agentSession.create", map[string]any{"provider": "nope", "cwd": dir}, -32020, "unknown_provider", map[string]any{"provider": "nope"}},
		{"capability not negotiated", "agentSession.close", map[string]any{"sessionId": "s_aaaaaaaa"}, -32601, "capability_not_negotiated", map[string]any{"capability": api.CapClose}},
		{"admin not negotiated", "daemon.shutdown", nil, -32601, "capability_not_negotiated", map[string]any{"capability": api.CapAdmin}},
		{"attach limit", "agentSession.attach", map[string]any{"sessionId": "s_aaaaaaaa", "limit": 5000}, -32602, "invalid_params", map[string]any{"field": "limit"}},
		{"bad decision", "agentSession.respond", map[string]any{"sessionId": "s_aaaaaaaa", "requestId": "r", "decision": "maybe"}, -32601, "capability_not_negotiated", nil},
		{"panic is internal", "agentSession.create", map[string]any{"provider": "echo", "cwd": dir}, -32603, "internal_error", nil},
	}
	check := func(t *testing.T, c *Client, tc tc) {
		t.Helper()
		err := call(t, c, tc.method, tc.params, nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Reason != tc.reason {
			t.Fatalf("%s: err = %v, want %d %s", tc.method, err, tc.code, tc.reason)
		}
		if !errors.Is(err, &Error{Reason: tc.reason}) {
			t.Fatalf("errors.Is by reason failed for %v", err)
		}
		for k, v := range tc.data {
			if fmt.Sprint(e.Data[k]) != fmt.Sprint(v) {
				t.Fatalf("%s: data.%s = %v, want %v (data %v)", tc.method, k, e.Data[k], v, e.Data)
			}
		}
		if n := ts.logs.count("rpc error", "method="+tc.method, "reason="+tc.reason); n == 0 {
			t.Fatalf("error %s of %s not logged", tc.reason, tc.method)
		}
	}
	for _, f := range framings {
		t.Run(f.String(), func(t *testing.T) {
			c := ts.client(t, f, nil, true)
			for _, tc := range preInit {
				check(t, c, tc)
			}
			caps := []string{api.CapAttach, api.CapStructuredHold, "agent-session.unknown.v9"}
			r, err := c.Initialize(t.Context(), 1, caps)
			if err != nil || !strings.HasPrefix(r.ConnectionID, "c-") || len(r.Capabilities) != len(Capabilities) {
				t.Fatalf("initialize: %+v %v", r, err)
			}
			for _, tc := range postInit {
				t.Run(tc.name, func(t *testing.T) { check(t, c, tc) })
			}
			var st Status
			if err := call(t, c, "daemon.status", nil, &st); err != nil || st.StateID != "st1" || st.Providers[0] != "echo" {
				t.Fatalf("status after errors: %+v %v", st, err)
			}
		})
	}
}
