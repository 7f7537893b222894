package acptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Conformance checks a conversation with an ACP agent, line by line,
// against the pinned SDK's ACP v1 JSON Schema (schema/v1/schema.json):
// the params of every request and notification by its method, and every
// answer by the method of the request it answers (ids followed in both
// directions), or as a JSON-RPC Error. Safe for concurrent use.
type Conformance struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	cache    map[string]*jsonschema.Schema
	params   map[string]string          // method -> its params' definition
	resp     map[string]string          // method -> its result's definition
	asked    map[bool]map[string]string // sent by the client (true) or the agent: id -> method
	kinds    []string                   // SessionUpdate's sessionUpdate values
}

// Directions of a line.
const (
	Client = "client" // the daemon wrote it
	Agent  = "agent"  // the agent wrote it
)

const schemaURL = "file:///acp/v1/schema.json"

// NewConformance loads the pinned SDK's schema.
func NewConformance(t testing.TB) *Conformance {
	t.Helper()
	path := SchemaPath(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := &Conformance{compiler: jsonschema.NewCompiler(), cache: map[string]*jsonschema.Schema{},
		params: map[string]string{}, resp: map[string]string{}, asked: map[bool]map[string]string{true: {}, false: {}}}
	if err := c.compiler.AddResource(schemaURL, doc); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Defs map[string]struct {
			Method string `json:"x-method"`
			OneOf  []struct {
				Properties struct {
					Kind struct {
						Const string `json:"const"`
					} `json:"sessionUpdate"`
				} `json:"properties"`
			} `json:"oneOf"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	for name, d := range s.Defs {
		switch {
		case d.Method == "":
		case strings.HasSuffix(name, "Response"):
			c.resp[d.Method] = name
		default:
			c.params[d.Method] = name
		}
	}
	for _, v := range s.Defs["SessionUpdate"].OneOf {
		c.kinds = append(c.kinds, v.Properties.Kind.Const)
	}
	if len(c.params) == 0 || len(c.kinds) == 0 {
		t.Fatalf("%s: no methods or session/update kinds found", path)
	}
	return c
}

// UpdateKinds is every sessionUpdate kind of the schema.
func (c *Conformance) UpdateKinds() []string { return append([]string(nil), c.kinds...) }

// Methods is every method of the schema with params.
func (c *Conformance) Methods() []string {
	out := make([]string, 0, len(c.params))
	for m := range c.params {
		out = append(out, m)
	}
	return out
}

func (c *Conformance) validate(def string, v any) error {
	s := c.cache[def]
	if s == nil {
		var err error
		if s, err = c.compiler.Compile(schemaURL + "#/$defs/" + def); err != nil {
			return fmt.Errorf("compile %s: %w", def, err)
		}
		c.cache[def] = s
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("not a valid %s: %w", def, err)
	}
	return nil
}

// Known reports whether method is in the schema (an agent's own
// extension methods are not).
func (c *Conformance) Known(method string) bool {
	_, ok := c.params[method]
	return ok
}

// Check checks one line written in direction dir (Client or Agent). A
// request or notification of a method not in the schema is an error from
// the client; from an agent it is its own extension, not checked.
func (c *Conformance) Check(dir string, b []byte) error {
	b = bytes.TrimSpace(b)
	var l struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("%s wrote no JSON object: %w", dir, err)
	}
	if l.JSONRPC != "2.0" {
		return fmt.Errorf("%s wrote a message without \"jsonrpc\":\"2.0\": %s", dir, cut(b))
	}
	client := dir == Client
	c.mu.Lock()
	defer c.mu.Unlock()
	hasID := len(l.ID) > 0 && string(l.ID) != "null"
	if l.Method != "" {
		def, ok := c.params[l.Method]
		if hasID {
			c.asked[client][string(l.ID)] = l.Method
		}
		switch {
		case !ok && client:
			return fmt.Errorf("the client sent %s, which is not in ACP %s", l.Method, SDKVersion)
		case !ok:
			return nil
		}
		if err := c.validate(def, mustAny(l.Params)); err != nil {
			return fmt.Errorf("%s %s: %w\n%s", dir, l.Method, err, cut(b))
		}
		return nil
	}
	if !hasID {
		return fmt.Errorf("%s wrote neither request, notification nor answer: %s", dir, cut(b))
	}
	method, ok := c.asked[!client][string(l.ID)]
	if !ok {
		return fmt.Errorf("%s answered unknown request id %s", dir, l.ID)
	}
	delete(c.asked[!client], string(l.ID))
	if len(l.Error) > 0 {
		if err := c.validate("Error", mustAny(l.Error)); err != nil {
			return fmt.Errorf("%s's error answer to %s: %w", dir, method, err)
		}
		return nil
	}
	def, ok := c.resp[method]
	if !ok {
		return fmt.Errorf("%s answered %s, which has no result in ACP %s", dir, method, SDKVersion)
	}
	if err := c.validate(def, mustAny(l.Result)); err != nil {
		return fmt.Errorf("%s's answer to %s: %w\n%s", dir, method, err, cut(b))
	}
	return nil
}

func cut(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

func mustAny(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	return v
}
