package rpc

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
)

func TestMethodTableSorted(t *testing.T) {
	if !sort.SliceIsSorted(methodList, func(i, j int) bool { return methodList[i].name < methodList[j].name }) {
		t.Fatal("methodList is not sorted by name")
	}
	if len(newTable(methodList)) != len(methodList) {
		t.Fatal("table lost a method")
	}
}

func TestDuplicateRegistrationPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate method did not panic")
		}
	}()
	newTable(append(append([]method{}, methodList...), methodList[0]))
}

// TestTableMatchesDoc: docs/protocol.md lists exactly the table's methods,
// each with its capability and slowness.
func TestTableMatchesDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string][2]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if !strings.Contains(name, ".") && name != "initialize" {
			continue // another table (e.g. the built-in ACP providers): methods are dotted
		}
		doc[name] = [2]string{strings.Trim(strings.TrimSpace(cells[2]), "`"), strings.TrimSpace(cells[3])}
	}
	for _, m := range methodList {
		d, ok := doc[m.name]
		if !ok {
			t.Errorf("%s is in the method table but not in docs/protocol.md", m.name)
			continue
		}
		slow := ""
		if m.slow {
			slow = "yes"
		}
		if d[0] != m.capability || d[1] != slow {
			t.Errorf("%s: doc says capability %q slow %q, table %q %q", m.name, d[0], d[1], m.capability, slow)
		}
		delete(doc, m.name)
	}
	for name := range doc {
		t.Errorf("%s is in docs/protocol.md but not in the method table", name)
	}
}

// TestErrorTableMatchesDoc: every api.Kind has a code, and docs/protocol.md
// lists exactly those codes and reasons.
func TestErrorTableMatchesDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) == 4 && strings.HasPrefix(strings.TrimSpace(cells[1]), "-32") {
			doc[strings.Trim(strings.TrimSpace(cells[2]), "`")] = strings.TrimSpace(cells[1])
		}
	}
	for k := api.KindInternal; k <= api.KindUnknownAccount; k++ {
		code, ok := kindCodes[k]
		if !ok {
			t.Errorf("kind %s has no code", k)
			continue
		}
		if doc[k.String()] != strconv.FormatInt(code, 10) {
			t.Errorf("%s: doc says %q, table %d", k, doc[k.String()], code)
		}
		delete(doc, k.String())
	}
	for reason := range doc {
		t.Errorf("%s is in docs/protocol.md's error table but is no api.Kind", reason)
	}
}
