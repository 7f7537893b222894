package rpc

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestInitializeNegotiated: the initialize result carries negotiated,
// client ∩ server in the client's order (unknown and repeated ones left
// out), beside capabilities (all the server offers); none asked: [].
func TestInitializeNegotiated(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	c := ts.client(t, FramingLines, nil, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Initialize(ctx, api.ProtocolVersion, []string{api.CapItems, "no.such.v9", api.CapAttach, api.CapItems})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{api.CapItems, api.CapAttach}; !slices.Equal(r.Negotiated, want) {
		t.Errorf("negotiated %v, want %v", r.Negotiated, want)
	}
	if !slices.Equal(r.Capabilities, Capabilities) {
		t.Errorf("capabilities %v, want all the server's %v", r.Capabilities, Capabilities)
	}
	c2 := ts.client(t, FramingLines, nil, true)
	var raw map[string]any
	if err := call(t, c2, "initialize", map[string]any{"protocolVersion": api.ProtocolVersion, "client": map[string]any{"name": "t", "version": "1"}, "capabilities": []string{}}, &raw); err != nil {
		t.Fatal(err)
	}
	if n, ok := raw["negotiated"].([]any); !ok || len(n) != 0 {
		t.Errorf("negotiated of a client that asked for none: %#v, want []", raw["negotiated"])
	}
}

// TestOpenRPCEnums: every closed set is an enum in the document, on a
// field the Go type has, and holds exactly what the daemon takes: every
// decision RespondParams accepts, and "yes" not.
func TestOpenRPCEnums(t *testing.T) {
	d := openrpcDocument(t)
	schemas := d["components"].(map[string]any)["schemas"].(map[string]any)
	for typ, fields := range schemaEnums {
		s, ok := schemas[typ].(map[string]any)
		if !ok {
			t.Errorf("schemaEnums names %s, which is not in the document", typ)
			continue
		}
		props := s["properties"].(map[string]any)
		for f, vals := range fields {
			p, ok := props[f].(map[string]any)
			if !ok {
				t.Errorf("schemaEnums names %s.%s, which %s lacks", typ, f, typ)
				continue
			}
			var got []string
			for _, v := range p["enum"].([]any) {
				got = append(got, v.(string))
			}
			if !slices.Equal(got, vals) {
				t.Errorf("%s.%s enum %v, want %v", typ, f, got, vals)
			}
		}
	}
	// The document itself, not the table: a decision is an enum there.
	dec, _ := schemas["RespondParams"].(map[string]any)["properties"].(map[string]any)["decision"].(map[string]any)["enum"].([]any)
	if len(dec) == 0 {
		t.Fatal("RespondParams.decision has no enum in the document: a validator would take \"yes\"")
	}
	for _, x := range dec {
		v := x.(string)
		if err := (api.RespondParams{SessionID: "s_00000000000000000000", RequestID: "r1", Decision: v}).Validate(); err != nil {
			t.Errorf("decision %q is in the enum but Validate refuses it: %v", v, err)
		}
	}
	if err := (api.RespondParams{SessionID: "s_00000000000000000000", RequestID: "r1", Decision: "yes"}).Validate(); err == nil {
		t.Error(`decision "yes" validates`)
	}
	statuses := []string{event.StatusCompleted, event.StatusInterrupted, event.StatusFailed}
	if got := schemaEnums["TurnCompletedData"]["status"]; !reflect.DeepEqual(got, statuses) {
		t.Errorf("turn.completed status enum %v, want the event package's %v", got, statuses)
	}
}

// TestOpenRPCMethodErrors: each method lists the errors it can answer,
// not all of them: the gate's, its capability's, its params', and its
// handler's own; no method lists a message-level error.
func TestOpenRPCMethodErrors(t *testing.T) {
	d := openrpcDocument(t)
	lists := map[string]map[string]bool{}
	for _, m := range d["methods"].([]any) {
		md := m.(map[string]any)
		set := map[string]bool{}
		for _, e := range md["errors"].([]any) {
			set[strings.TrimPrefix(e.(map[string]any)["$ref"].(string), "#/components/errors/")] = true
		}
		lists[md["name"].(string)] = set
	}
	for _, c := range []struct {
		method   string
		has, not []string
	}{
		{"initialize", []string{"already_initialized", "unsupported_protocol", "invalid_params", "internal_error"},
			[]string{"not_initialized", "capability_not_negotiated", "session_not_found", "cursor_ahead"}},
		{"daemon.status", []string{"not_initialized", "internal_error"},
			[]string{"capability_not_negotiated", "session_not_found", "already_initialized", "upgrade_refused"}},
		{"rpc.discover", []string{"not_initialized"}, []string{"session_not_found", "capability_not_negotiated"}},
		{"agentSession.hold", []string{"capability_not_negotiated", "session_not_found", "stale_fence", "limit_exceeded", "invalid_params"},
			[]string{"cursor_ahead", "request_not_found", "upgrade_refused", "already_initialized"}},
		{"agentSession.read", []string{"cursor_ahead", "cursor_compacted", "session_not_found"}, []string{"request_not_found"}},
		{"agentSession.respond", []string{"request_not_found", "turn_running"}, []string{"cursor_compacted"}},
		{"agentSession.create", []string{"unknown_provider", "invalid_params", "limit_exceeded"}, []string{"capability_not_negotiated"}},
		{"daemon.upgrade", []string{"upgrade_refused", "capability_not_negotiated"}, []string{"session_not_found"}},
	} {
		l, ok := lists[c.method]
		if !ok {
			t.Errorf("no method %s", c.method)
			continue
		}
		for _, r := range c.has {
			if !l[r] {
				t.Errorf("%s does not list %s", c.method, r)
			}
		}
		for _, r := range c.not {
			if l[r] {
				t.Errorf("%s lists %s, which it cannot answer", c.method, r)
			}
		}
	}
	for name, l := range lists {
		for _, r := range []string{"method_not_found", "batch_not_supported", "invalid_request"} {
			if l[r] {
				t.Errorf("%s lists the message-level %s", name, r)
			}
		}
	}
}
