package codextest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/npminstall"
)

var schema struct {
	once sync.Once
	dir  string
	err  error
}

// SchemaDir returns the directory holding the pinned binary's
// `app-server generate-json-schema` output, generating it once into the
// install's cache (written aside and renamed into place).
func SchemaDir(t testing.TB) string {
	t.Helper()
	bin := Binary(t)
	schema.once.Do(func() {
		dir := filepath.Join(CacheDir(), "schema")
		if _, err := os.Stat(filepath.Join(dir, "ServerNotification.json")); err == nil {
			schema.dir = dir
			return
		}
		tmp, err := os.MkdirTemp(CacheDir(), ".schema-*")
		if err != nil {
			schema.err = err
			return
		}
		defer os.RemoveAll(tmp)
		if out, err := exec.Command(bin, "app-server", "generate-json-schema", "--out", tmp).CombinedOutput(); err != nil {
			schema.err = fmt.Errorf("generate-json-schema: %w\n%s", err, npminstall.Tail(out, 2000))
			return
		}
		if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
			if _, serr := os.Stat(filepath.Join(dir, "ServerNotification.json")); serr != nil { // not a racing twin
				schema.err = err
				return
			}
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
