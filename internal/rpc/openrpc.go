package rpc

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
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
	errs, errRefs := openrpcErrors()
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
			"errors":         errRefs,
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

// openrpcErrors is every error the server answers, keyed by data.reason,
// and the list of $refs each method carries.
func openrpcErrors() (map[string]any, []any) {
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
	refs := []any{}
	for _, r := range sortedKeys(errs) {
		refs = append(refs, map[string]any{"$ref": "#/components/errors/" + r})
	}
	return errs, refs
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
