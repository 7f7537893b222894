package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
)

// TestFieldLimits: every client-supplied string over its documented bound
// (docs/protocol.md "Limits") is invalid_params naming the field and the
// limit, the message repeats at most a 32-byte prefix of the value, the
// log line too, and the connection goes on serving. A value at the bound
// is accepted. The numbers are written out: they are the documented ones.
func TestFieldLimits(t *testing.T) {
	ts := startServer(t, newFake(), func(o *ServerOptions) { o.MaxMessageBytes = 4 << 20 })
	c := ts.client(t, FramingLines, Capabilities, false)
	dir := t.TempDir()
	big := func(n int) string { return strings.Repeat("A", n) }
	ttl := func(v int64) *int64 { return &v }
	const sid = "s_aaaaaaaa"
	tests := []struct {
		name, method string
		params       any
		field        string
		limit        int // 0: no data.limit
	}{
		{"32769-byte clientMessageId", "agentSession.send", api.SendParams{SessionID: sid, Text: "hi", ClientMessageID: big(32769)}, "clientMessageId", 256},
		{"257-byte clientMessageId", "agentSession.send", api.SendParams{SessionID: sid, Text: "hi", ClientMessageID: big(257)}, "clientMessageId", 256},
		{"900 KB holderId", "agentSession.hold", api.HoldParams{SessionID: sid, HolderID: big(900 << 10)}, "holderId", 256},
		{"long surface", "agentSession.hold", api.HoldParams{SessionID: sid, HolderID: "h", Surface: big(257)}, "surface", 256},
		{"ttlMs 1e13", "agentSession.hold", api.HoldParams{SessionID: sid, HolderID: "h", TTLMs: ttl(1e13)}, "ttlMs", 604800000},
		{"ttlMs over 7 days", "agentSession.hold", api.HoldParams{SessionID: sid, HolderID: "h", TTLMs: ttl(604800001)}, "ttlMs", 604800000},
		{"ttlMs negative", "agentSession.hold", api.HoldParams{SessionID: sid, HolderID: "h", TTLMs: ttl(-1)}, "ttlMs", 604800000},
		{"ttlMs zero", "agentSession.hold", api.HoldParams{SessionID: sid, HolderID: "h", TTLMs: ttl(0)}, "ttlMs", 604800000},
		{"long release holderId", "agentSession.release", api.ReleaseParams{SessionID: sid, HolderID: big(257)}, "holderId", 256},
		{"long holdToken", "agentSession.release", api.ReleaseParams{SessionID: sid, HolderID: "h", HoldToken: big(257)}, "holdToken", 256},
		{"1 MB title", "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Title: big(1 << 20)}, "title", 4096},
		{"long provider", "agentSession.create", api.CreateParams{Provider: big(257), Cwd: dir}, "provider", 256},
		{"long cwd", "agentSession.create", api.CreateParams{Provider: "echo", Cwd: "/" + big(4096)}, "cwd", 4096},
		{"large options", "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Options: []byte(`"` + big(64<<10) + `"`)}, "options", 65536},
		{"long account", "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Account: big(65)}, "account", 64},
		{"bad account", "agentSession.switchAccount", api.SwitchAccountParams{SessionID: sid, Account: "a b"}, "account", 64},
		{"no account", "agentSession.switchAccount", api.SwitchAccountParams{SessionID: sid}, "account", 64},
		{"bad when", "agentSession.switchAccount", api.SwitchAccountParams{SessionID: sid, Account: "a", When: "later"}, "when", 0},
		{"options not an object", "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Options: []byte(`"x"`)}, "options", 0},
		{"content not an object", "agentSession.respond", api.RespondParams{SessionID: sid, RequestID: "r", Decision: "approve", Content: []byte(`"str"`)}, "content", 0},
		{"long requestId", "agentSession.respond", api.RespondParams{SessionID: sid, RequestID: big(257), Decision: "approve"}, "requestId", 256},
		{"long subscriptionId", "agentSession.detach", api.DetachParams{SubscriptionID: big(257)}, "subscriptionId", 256},
		{"attach limit", "agentSession.attach", api.AttachParams{SessionID: sid, Limit: 4097}, "limit", 4096},
		{"read limit", "agentSession.read", api.ReadParams{SessionID: sid, Limit: -1}, "limit", 4096},
		{"long bad session id", "agentSession.get", api.SessionParams{SessionID: "../" + big(1<<20)}, "sessionId", 0},
		{"long relative cwd", "agentSession.create", api.CreateParams{Provider: "echo", Cwd: big(4000)}, "cwd", 0},
		{"long missing cwd", "agentSession.create", api.CreateParams{Provider: "echo", Cwd: "/" + big(4000)}, "cwd", 0},
		{"long decision", "agentSession.respond", api.RespondParams{SessionID: sid, RequestID: "r", Decision: big(5000)}, "decision", 0},
		{"huge number for a string", "agentSession.get", map[string]any{"sessionId": json.Number(strings.Repeat("1", 100000))}, "sessionId", 0},
		{"huge number for an int", "agentSession.read", map[string]any{"sessionId": sid, "limit": json.Number(strings.Repeat("1", 100000))}, "limit", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := call(t, c, tc.method, tc.params, nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidParams || e.Reason != "invalid_params" {
				t.Fatalf("err = %.300v, want invalid_params", err)
			}
			if e.Data["field"] != tc.field {
				t.Fatalf("data.field = %v, want %s (data %.300v)", e.Data["field"], tc.field, e.Data)
			}
			if tc.limit != 0 {
				if e.Data["limit"] != float64(tc.limit) {
					t.Fatalf("data.limit = %v, want %d", e.Data["limit"], tc.limit)
				}
				if !strings.Contains(e.Message, tc.field) || !strings.Contains(e.Message, fmt.Sprint(tc.limit)) {
					t.Fatalf("message %.300q does not name %s and %d", e.Message, tc.field, tc.limit)
				}
			}
			checkEcho(t, e.Message, fmt.Sprint(e.Data))
		})
	}
	ts.logs.mu.Lock()
	lines := append([]string(nil), ts.logs.lines...)
	ts.logs.mu.Unlock()
	for _, l := range lines {
		checkEcho(t, l)
	}

	// At the bound is accepted; the connection served through all of it.
	ok := []struct {
		method string
		params any
	}{
		{"agentSession.hold", api.HoldParams{SessionID: sid, HolderID: big(256), Surface: big(256), TTLMs: ttl(604800000)}},
		{"agentSession.release", api.ReleaseParams{SessionID: sid, HolderID: big(256), HoldToken: big(256)}},
		{"agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Title: big(4096)}},
		{"agentSession.read", api.ReadParams{SessionID: sid, Limit: 4096}},
	}
	for _, tc := range ok {
		if err := call(t, c, tc.method, tc.params, nil); err != nil {
			t.Fatalf("%s at the bound: %.300v", tc.method, err)
		}
	}
}

// TestUnknownMethodEcho: an unknown method's name is repeated only as a
// prefix, in the message and in data.method.
func TestUnknownMethodEcho(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	c := ts.client(t, FramingLines, nil, false)
	err := call(t, c, "x."+strings.Repeat("A", 3000), nil, nil)
	var e *Error
	if !errors.As(err, &e) || e.Reason != "method_not_found" {
		t.Fatalf("err = %.300v, want method_not_found", err)
	}
	checkEcho(t, e.Message, fmt.Sprint(e.Data))
	if err := call(t, c, "agentSession.frobnicate", nil, nil); err == nil || !strings.Contains(err.Error(), `"agentSession.frobnicate"`) {
		t.Fatalf("a short name is repeated whole: %v", err)
	}
}

// TestInitializeClientLimits: initialize's client name is bounded too (it
// is logged).
func TestInitializeClientLimits(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	c := ts.client(t, FramingLines, nil, true)
	err := call(t, c, "initialize", map[string]any{"protocolVersion": 1, "client": map[string]any{"name": strings.Repeat("A", 257)}}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Reason != "invalid_params" || e.Data["field"] != "client.name" {
		t.Fatalf("err = %.300v, want invalid_params client.name", err)
	}
	checkEcho(t, e.Message)
}

// checkEcho fails when any of ss repeats more than a 32-byte prefix of a
// test value (runs of 'A' or '1').
func checkEcho(t *testing.T, ss ...string) {
	t.Helper()
	for _, s := range ss {
		if strings.Contains(s, strings.Repeat("A", 33)) || strings.Contains(s, strings.Repeat("1", 33)) || len(s) > 600 {
			t.Fatalf("error echoes more than a prefix of the value (%d bytes): %.200q", len(s), s)
		}
	}
}
