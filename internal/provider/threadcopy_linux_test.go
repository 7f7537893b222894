package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A source that fails while it is read (/proc/self/mem: a regular file
// whose read at offset 0 fails): the error names it, the older copy at
// dst is left whole and no temporary file stays.
func TestCopyThreadFileReadFailsMidway(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(dst, []byte("older copy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := CopyThreadFile("/proc/self/mem", dst, 0)
	if err == nil || !strings.Contains(err.Error(), "read thread copy /proc/self/mem") {
		t.Fatalf("error %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "older copy\n" {
		t.Fatalf("older copy changed: %q", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("left in dir: %v", es)
	}
}
