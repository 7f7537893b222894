package rpc

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
)

func openrpcDocument(t *testing.T) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(OpenRPC(), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func protocolDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docMethodTable is the method column of docs/protocol.md's method table.
func docMethodTable(doc string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) >= 5 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			out[strings.Trim(strings.TrimSpace(cells[1]), "`")] = true
		}
	}
	return out
}

// TestOpenRPCMethods: the document has exactly the method table's methods,
// each with its capability, and each is in docs/protocol.md's table.
func TestOpenRPCMethods(t *testing.T) {
	d := openrpcDocument(t)
	table := docMethodTable(protocolDoc(t))
	inDoc := map[string]string{}
	for _, m := range d["methods"].([]any) {
		mm := m.(map[string]any)
		name := mm["name"].(string)
		inDoc[name] = mm["x-capability"].(string)
		if !table[name] {
			t.Errorf("%s is in the OpenRPC document but not in docs/protocol.md's method table", name)
		}
		if _, ok := mm["result"].(map[string]any)["schema"]; !ok {
			t.Errorf("%s has no result schema", name)
		}
	}
	for _, m := range methodList {
		c, ok := inDoc[m.name]
		if !ok {
			t.Errorf("%s is in the method table but not in the OpenRPC document", m.name)
		} else if c != m.capability {
			t.Errorf("%s: document capability %q, table %q", m.name, c, m.capability)
		}
		delete(inDoc, m.name)
	}
	for name := range inDoc {
		t.Errorf("%s is in the OpenRPC document but not in the method table", name)
	}
	if len(methodTypes) != len(methodList) {
		t.Errorf("methodTypes has %d entries, the method table %d", len(methodTypes), len(methodList))
	}
}

// TestOpenRPCErrors: every error the code can answer is in the document
// and named in docs/protocol.md, and the document has no other.
func TestOpenRPCErrors(t *testing.T) {
	d := openrpcDocument(t)
	errs := d["components"].(map[string]any)["errors"].(map[string]any)
	want := map[string]int64{}
	for k := api.Kind(0); !strings.HasPrefix(k.String(), "kind("); k++ {
		code, ok := kindCodes[k]
		if !ok {
			t.Errorf("kind %s has no code", k)
		}
		want[k.String()] = code
	}
	// Protocol errors: every reason the package's own code answers with.
	re := regexp.MustCompile(`protoError\{\w+, "([a-z_]+)"|"reason":"([a-z_]+)"`)
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			r := m[1] + m[2]
			code, ok := protoErrors[r]
			if !ok {
				t.Errorf("%s answers reason %q, which protoErrors lacks", f, r)
			}
			want[r] = code
		}
	}
	doc := protocolDoc(t)
	for r, code := range want {
		e, ok := errs[r].(map[string]any)
		if !ok {
			t.Errorf("error %s is in the code but not in the OpenRPC document", r)
			continue
		}
		if int64(e["code"].(float64)) != code {
			t.Errorf("error %s: document code %v, code %d", r, e["code"], code)
		}
		if !strings.Contains(doc, "`"+r+"`") {
			t.Errorf("error %s is not named in docs/protocol.md", r)
		}
		delete(errs, r)
	}
	for r := range errs {
		t.Errorf("error %s is in the OpenRPC document but answered by no code", r)
	}
}

// eventConstants parses internal/event for the event type constants: the
// const blocks documented "Event types" and "Item event types".
func eventConstants(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	dir := filepath.Join("..", "event")
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range af.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST || gd.Doc == nil {
				continue
			}
			doc := gd.Doc.Text()
			if !strings.HasPrefix(doc, "Event types") && !strings.HasPrefix(doc, "Item event types") {
				continue
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					if lit, ok := v.(*ast.BasicLit); ok {
						s, _ := strconv.Unquote(lit.Value)
						out = append(out, s)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestOpenRPCEvents: the document describes exactly internal/event's event
// types.
func TestOpenRPCEvents(t *testing.T) {
	consts := eventConstants(t)
	if len(consts) < 20 {
		t.Fatalf("found only %d event constants: %v", len(consts), consts)
	}
	var inDoc []string
	for _, e := range openrpcDocument(t)["x-events"].([]any) {
		inDoc = append(inDoc, e.(map[string]any)["type"].(string))
	}
	if strings.Join(consts, ",") != strings.Join(inDoc, ",") {
		t.Errorf("event types:\n code     %v\n document %v", consts, inDoc)
	}
}

// TestOpenRPCTypes: every exported wire struct of internal/api and of this
// package's params.go is a schema of the document.
func TestOpenRPCTypes(t *testing.T) {
	schemas := openrpcDocument(t)["components"].(map[string]any)["schemas"].(map[string]any)
	fset := token.NewFileSet()
	for _, f := range []string{filepath.Join("..", "api", "types.go"), "params.go"} {
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range af.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.StructType); ok && ts.Name.IsExported() {
					if _, ok := schemas[ts.Name.Name]; !ok {
						t.Errorf("%s (%s) is a wire type but not in the OpenRPC document", ts.Name.Name, f)
					}
				}
			}
		}
	}
}

// TestOpenRPCCheckedIn: the copy the TypeScript client generates its types
// from is the current document (regenerate: sessiond openrpc >
// clients/typescript/openrpc.json, then npm run gen there).
func TestOpenRPCCheckedIn(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "clients", "typescript", "openrpc.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, OpenRPC()) {
		t.Fatal("clients/typescript/openrpc.json is stale: run `go run ./cmd/sessiond openrpc > clients/typescript/openrpc.json` and `npm run gen` in clients/typescript")
	}
}

// TestDiscoverOverWire: rpc.discover needs no capability and answers the
// document.
func TestDiscoverOverWire(t *testing.T) {
	ts := startServer(t, newFake(), func(o *ServerOptions) { o.MaxMessageBytes = 1 << 20 })
	c := ts.client(t, FramingHeader, nil, false)
	var got json.RawMessage
	if err := call(t, c, "rpc.discover", nil, &got); err != nil {
		t.Fatal(err)
	}
	var a, b any
	json.Unmarshal(got, &a)
	json.Unmarshal(OpenRPC(), &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatal("rpc.discover answered a different document")
	}
}
