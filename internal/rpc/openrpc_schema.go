package rpc

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// schemaGen turns Go types into JSON Schema (draft 7, as OpenRPC 1.3
// uses) by reflection, following encoding/json's rules: a field's name is
// its json tag; a field without omitempty is always present (required); a
// pointer without omitempty may be null. Named structs become
// components.schemas entries referenced with $ref, so every wire type has
// one name in the document. It is ours (a few dozen lines) rather than a
// library's because it needs exactly encoding/json's view and nothing more.
type schemaGen struct {
	defs map[string]any
}

var (
	timeType    = reflect.TypeOf(time.Time{})
	rawType     = reflect.TypeOf(json.RawMessage(nil))
	anyType     = reflect.TypeOf((*any)(nil)).Elem()
	emptyStruct = reflect.TypeOf(struct{}{})
)

// schemaEnums are the closed sets on the wire: struct name -> json field
// -> every value the daemon sends or takes (PROTOCOL.md). A validator of
// the document then refuses anything else ("yes" as a decision).
var schemaEnums = map[string]map[string][]string{
	"RespondParams":         {"decision": {"approve", "approveForSession", "deny", "cancel"}},
	"ApprovalResolvedData":  {"decision": {"approve", "approveForSession", "deny", "cancel"}},
	"ApprovalRequestedData": {"kind": {"command", "fileChange", "permissions", "userInput", "elicitation", "toolCall"}},
	"TurnCompletedData":     {"status": {"completed", "interrupted", "failed"}},
	"SessionInfo":           {"state": {"stored", "starting", "live", "exited", "evicting"}, "lease": {"released", "reserved", "live"}},
	"AttentionNotice":       {"kind": {api.AttentionTurnCompleted, api.AttentionApprovalRequested, api.AttentionTurnFailed}},
	"AttentionStatus":       {"notify": {"none", "desktop"}},
	"SwitchAccountParams":   {"when": {api.SwitchWhenIdle, api.SwitchWhenNow}},
	"AccountSwitchData": {"cause": {event.SwitchCauseUser, event.SwitchCauseRateLimited},
		"continuity": {event.ContinuityNative, event.ContinuityPortable, event.ContinuityNone}},
}

// ref returns the schema of v's type, registering named structs.
func (g *schemaGen) ref(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return g.schema(reflect.TypeOf(v))
}

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType || t == anyType:
		return map[string]any{}
	case t == emptyStruct:
		return map[string]any{"type": "object", "additionalProperties": false}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		if _, ok := g.defs[t.Name()]; !ok {
			g.defs[t.Name()] = nil // breaks recursion
			g.defs[t.Name()] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + t.Name()}
	}
	return map[string]any{}
}

// object describes a struct's encoded fields.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		s := g.schema(f.Type)
		omit := strings.Contains(","+opts+",", ",omitempty,")
		if f.Type.Kind() == reflect.Pointer && !omit {
			s = map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
		}
		if vals, ok := schemaEnums[t.Name()][name]; ok {
			s = map[string]any{"type": "string", "enum": vals}
		}
		props[name] = s
		if !omit {
			required = append(required, name)
		}
	}
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}
