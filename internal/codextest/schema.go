package codextest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var schema struct {
	once sync.Once
	dir  string
	err  error
}

// SchemaDir runs the pinned binary's `app-server generate-json-schema`
// once per test process and returns the directory it wrote.
func SchemaDir(t testing.TB) string {
	t.Helper()
	bin := Binary(t)
	schema.once.Do(func() {
		dir, err := os.MkdirTemp("", "codex-schema-*")
		if err != nil {
			schema.err = err
			return
		}
		if out, err := exec.Command(bin, "app-server", "generate-json-schema", "--out", dir).CombinedOutput(); err != nil {
			schema.err = fmt.Errorf("generate-json-schema: %w\n%s", err, tail(out, 2000))
			return
		}
		schema.dir = dir
	})
	if schema.err != nil {
		t.Fatalf("codex schema: %v", schema.err)
	}
	return schema.dir
}

// Methods returns the method names of a generated union schema
// (ServerNotification.json, ServerRequest.json, ClientRequest.json, …).
func Methods(t testing.TB, file string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(SchemaDir(t), file))
	if err != nil {
		t.Fatalf("codex schema: %v", err)
	}
	var s struct {
		OneOf []struct {
			Properties struct {
				Method struct {
					Enum []string `json:"enum"`
				} `json:"method"`
			} `json:"properties"`
		} `json:"oneOf"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("codex schema %s: %v", file, err)
	}
	var out []string
	for _, v := range s.OneOf {
		out = append(out, v.Properties.Method.Enum...)
	}
	if len(out) == 0 {
		t.Fatalf("codex schema %s lists no methods", file)
	}
	return out
}
