package rpc

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// OpenRPCVersion is the OpenRPC specification version of the document.
const OpenRPCVersion = "1.3.2"

var (
	discoverOnce sync.Once
	discoverDoc  []byte
)

// OpenRPC returns the rpc.discover document (indented JSON with a final
// newline): every method of the method table with its capability, params
// and result as JSON Schema generated from the Go types, the error codes
// with their data.reason, the notifications, and every journal event
// type's data. It depends on nothing but the code, so the same build
// always prints the same bytes.
func OpenRPC() []byte {
	discoverOnce.Do(func() {
		b, err := json.MarshalIndent(buildOpenRPC(), "", "  ")
		if err != nil {
			panic("rpc: encode openrpc: " + err.Error())
		}
		discoverDoc = append(b, '\n')
	})
	return discoverDoc
}

func buildOpenRPC() map[string]any {
	g := &schemaGen{defs: map[string]any{}}
	errs := openrpcErrors()
	methods := make([]any, 0, len(methodList))
	for _, m := range methodList {
		wt, ok := methodTypes[m.name]
		if !ok {
			panic("rpc: no wire types for " + m.name)
		}
		params := []any{}
		if wt.params != nil {
			params = paramDescriptors(g, wt.params)
		}
		md := map[string]any{
			"name":           m.name,
			"paramStructure": "by-name",
			"params":         params,
			"result":         map[string]any{"name": "result", "schema": g.ref(wt.result)},
			"errors":         methodErrorRefs(m, wt, errs),
			"x-capability":   m.capability,
			"x-queued":       m.slow,
		}
		if wt.params != nil {
			md["x-params"] = g.ref(wt.params)
		}
		methods = append(methods, md)
	}
	notes := []any{}
	for _, name := range sortedKeys(notifyTypes) {
		notes = append(notes, map[string]any{"name": name, "x-capability": notifyCaps[name],
			"params": g.ref(notifyTypes[name])})
	}
	events := []any{}
	for _, typ := range sortedKeys(eventData) {
		d := map[string]any{"type": typ, "data": g.ref(eventData[typ])}
		if eventData[typ] == nil {
			d["data"] = map[string]any{"type": "object"}
		}
		if event.ItemsV1(typ) {
			d["x-capability"] = api.CapItems
		}
		events = append(events, d)
	}
	return map[string]any{
		"openrpc": OpenRPCVersion,
		"info": map[string]any{
			"title":       "sessiond",
			"version":     strconv.Itoa(api.ProtocolVersion),
			"description": "sessiond wire protocol (JSON-RPC 2.0 over a Unix socket). x-capability names the capability a method, notification or event needs (empty: none); x-params is the params object as one schema.",
		},
		"methods":         methods,
		"x-notifications": notes,
		"x-events":        events,
		"x-capabilities":  Capabilities,
		"components":      map[string]any{"schemas": g.defs, "errors": errs},
	}
}

// paramDescriptors lists a params struct's fields as OpenRPC content
// descriptors (by-name).
func paramDescriptors(g *schemaGen, params any) []any {
	g.ref(params) // registers it
	obj := g.defs[typeName(params)].(map[string]any)
	props := obj["properties"].(map[string]any)
	req := map[string]bool{}
	if r, ok := obj["required"].([]string); ok {
		for _, n := range r {
			req[n] = true
		}
	}
	out := []any{}
	for _, name := range sortedKeys(props) {
		out = append(out, map[string]any{"name": name, "schema": props[name], "required": req[name]})
	}
	return out
}

func typeName(v any) string { return reflect.TypeOf(v).Name() }

// openrpcErrors is every error the server answers, keyed by data.reason.
func openrpcErrors() map[string]any {
	errs := map[string]any{}
	add := func(reason string, code int64) {
		errs[reason] = map[string]any{"code": code, "message": reason,
			"data": map[string]any{"reason": reason}}
	}
	for k, code := range kindCodes {
		add(k.String(), code)
	}
	for reason, code := range protoErrors {
		add(reason, code)
	}
	return errs
}

// backendKinds are what a session method's Backend call can answer; the
// cursor and request errors only the methods that take a cursor or a
// request id. An over-approximation where the host's paths are many (a
// hold may start, evict or fail a provider): never an error a method can
// answer left out.
var backendKinds = []api.Kind{api.KindSessionNotFound, api.KindSessionNotLive, api.KindSessionOwned,
	api.KindStaleFence, api.KindEvictionFailed, api.KindExitUnproven, api.KindProviderFailed,
	api.KindTurnRunning, api.KindInvalidState, api.KindLimitExceeded, api.KindUnknownProvider,
	api.KindSessionDamaged, api.KindStoreUnavailable}

// methodErrorRefs lists the errors m can answer (data.reason, as $refs):
// the gate's (not_initialized, or already_initialized for initialize;
// capability_not_negotiated when m needs a capability), invalid_params
// when it takes params, limit_exceeded when it is queued (queued_calls),
// internal_error, and its handler's own. Message-level errors (a batch,
// an invalid request, an unknown method) belong to no method.
func methodErrorRefs(m method, wt wireTypes, errs map[string]any) []any {
	set := map[string]bool{api.KindInternal.String(): true}
	addKind := func(ks ...api.Kind) {
		for _, k := range ks {
			set[k.String()] = true
		}
	}
	if m.name == "initialize" {
		set["already_initialized"] = true
		addKind(api.KindInvalidParams, api.KindUnsupportedProtocol)
	} else {
		addKind(api.KindNotInitialized)
	}
	if m.capability != "" {
		set["capability_not_negotiated"] = true
	}
	if wt.params != nil || m.name == "agentSession.list" {
		addKind(api.KindInvalidParams)
	}
	if m.slow {
		addKind(api.KindLimitExceeded)
	}
	switch {
	case m.name == methodUpgrade:
		addKind(api.KindUpgradeRefused)
	case strings.HasPrefix(m.name, "agentSession."):
		addKind(backendKinds...)
		switch m.name {
		case "agentSession.attach", "agentSession.read":
			addKind(api.KindCursorAhead, api.KindCursorCompacted)
		case "agentSession.respond":
			addKind(api.KindRequestNotFound)
		}
	}
	refs := []any{}
	for _, r := range sortedKeys(set) {
		if _, ok := errs[r]; !ok {
			panic("rpc: method " + m.name + " lists error " + r + ", which is not in the document")
		}
		refs = append(refs, map[string]any{"$ref": "#/components/errors/" + r})
	}
	return refs
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
