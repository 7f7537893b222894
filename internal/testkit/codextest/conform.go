package codextest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Conformance checks a conversation with codex app-server, line by line,
// against the pinned binary's generated JSON Schema: what the client
// writes (requests, notifications, answers to the server's requests) and
// what the server writes (notifications, requests, answers to ours). It
// follows request ids in both directions to know which response schema
// applies. Safe for concurrent use.
type Conformance struct {
	dir      string
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	cache    map[string]*jsonschema.Schema
	clientID map[string]string // our request id -> method
	serverID map[string]string // server request id -> method
	resp     map[string]string // request method -> response type name
	params   map[string]string // request or notification method -> params type name
}

// NewConformance loads the schema of the pinned binary.
func NewConformance(t testing.TB) *Conformance {
	t.Helper()
	c := &Conformance{dir: SchemaDir(t), compiler: jsonschema.NewCompiler(), cache: map[string]*jsonschema.Schema{},
		clientID: map[string]string{}, serverID: map[string]string{}, resp: map[string]string{}, params: map[string]string{}}
	for _, f := range []string{"ClientRequest.json", "ServerRequest.json", "ServerNotification.json", "ClientNotification.json"} {
		b, err := os.ReadFile(filepath.Join(c.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			OneOf []struct {
				Properties struct {
					Method struct {
						Enum []string `json:"enum"`
					} `json:"method"`
					Params struct {
						Ref string `json:"$ref"`
					} `json:"params"`
				} `json:"properties"`
			} `json:"oneOf"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		for _, v := range s.OneOf {
			ref := strings.TrimPrefix(v.Properties.Params.Ref, "#/definitions/")
			for _, m := range v.Properties.Method.Enum {
				if ref != "" {
					c.params[m] = ref
				}
				if strings.HasSuffix(f, "Request.json") {
					c.resp[m] = strings.TrimSuffix(ref, "Params") + "Response"
				}
			}
		}
	}
	return c
}

// schema compiles the generated file of a type (top level, v2 or v1).
func (c *Conformance) schema(name string) (*jsonschema.Schema, error) {
	if s := c.cache[name]; s != nil {
		return s, nil
	}
	for _, sub := range []string{"", "v2", "v1"} {
		p := filepath.Join(c.dir, sub, name+".json")
		if _, err := os.Stat(p); err != nil {
			continue
		}
		s, err := c.compiler.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", name, err)
		}
		c.cache[name] = s
		return s, nil
	}
	return nil, fmt.Errorf("codex %s's schema has no type %s", Version, name)
}

func (c *Conformance) validate(name string, v any) error {
	s, err := c.schema(name)
	if err != nil {
		return err
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("not a valid %s: %w", name, err)
	}
	return nil
}

type line struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// Client checks a line the client wrote.
func (c *Conformance) Client(b []byte) error { return c.check(b, true) }

// Server checks a line the server wrote.
func (c *Conformance) Server(b []byte) error { return c.check(b, false) }

func (c *Conformance) check(b []byte, client bool) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hasID := len(l.ID) > 0 && string(l.ID) != "null"
	id := string(l.ID)
	mine, theirs, union, notes := c.clientID, c.serverID, "ClientRequest", "ClientNotification"
	if !client {
		mine, theirs, union, notes = c.serverID, c.clientID, "ServerRequest", "ServerNotification"
	}
	if l.Method != "" {
		if hasID {
			mine[id] = l.Method
		}
		if err := c.validate(map[bool]string{true: union, false: notes}[hasID], v); err != nil {
			return c.explain(l.Method, b, err)
		}
		return nil
	}
	switch {
	case hasID: // an answer to the other side's request
		method, ok := theirs[id]
		if !ok {
			return fmt.Errorf("answer to unknown request id %s", id)
		}
		delete(theirs, id)
		if len(l.Error) > 0 {
			return c.validate("JSONRPCErrorError", mustAny(l.Error))
		}
		name, ok := c.resp[method]
		if !ok {
			return fmt.Errorf("no response type for %s", method)
		}
		return c.validate(name, mustAny(l.Result))
	}
	return fmt.Errorf("neither request, notification nor answer")
}

// explain narrows a union's failure (one line per variant) to the
// method's own params type, or says the method is not in the schema.
func (c *Conformance) explain(method string, b []byte, err error) error {
	name, ok := c.params[method]
	if !ok {
		return fmt.Errorf("method %s is not in codex %s's schema", method, Version)
	}
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(b, &m) == nil && len(m.Params) > 0 {
		if perr := c.validate(name, mustAny(m.Params)); perr != nil {
			return fmt.Errorf("%s: %w", method, perr)
		}
	}
	return fmt.Errorf("%s: %w", method, err)
}

func mustAny(b json.RawMessage) any {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	return v
}
