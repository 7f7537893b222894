package rpc

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCapabilitiesMatchDoc: docs/protocol.md's Handshake lists exactly the
// server's capabilities.
func TestCapabilitiesMatchDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "Server\ncapabilities:")
	end := strings.Index(doc[start:], "(a test keeps")
	if start < 0 || end < 0 {
		t.Fatal("docs/protocol.md: no \"Server capabilities: … (a test keeps\" sentence")
	}
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z.-]+\\.v[0-9]+)`").FindAllStringSubmatch(doc[start:start+end], -1) {
		listed = append(listed, m[1])
	}
	want := slices.Sorted(slices.Values(Capabilities))
	if slices.Sort(listed); !slices.Equal(listed, want) {
		t.Fatalf("docs list %v, server has %v", listed, want)
	}
}
