package acp

import (
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/acptest"
)

var (
	confOnce sync.Once
	conf     *acptest.Conformance
)

// conformance checks each line against the pinned SDK's ACP schema.
func conformance(t *testing.T) func(dir string, line []byte) error {
	t.Helper()
	confOnce.Do(func() { conf = acptest.NewConformance(t) })
	return conf.Check
}

// Every sessionUpdate kind of the pinned schema is in exactly one of the
// adapter's tables: mapped, ignored (with its reason), or a notice.
func TestEveryUpdateKindIsHandled(t *testing.T) {
	conformance(t)
	kinds := conf.UpdateKinds()
	for _, k := range kinds {
		n := 0
		if _, ok := updateMapped[k]; ok {
			n++
		}
		if _, ok := updateIgnored[k]; ok {
			n++
		}
		if _, ok := updateNotices[k]; ok {
			n++
		}
		if n != 1 {
			t.Errorf("sessionUpdate %q is in %d of the tables, want exactly 1", k, n)
		}
	}
	var extra []string
	for _, m := range []map[string]bool{keys(updateMapped), keys(updateIgnored), keys(updateNotices)} {
		for k := range m {
			if !slices.Contains(kinds, k) {
				extra = append(extra, k)
			}
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("the tables name kinds the schema does not have: %v", extra)
	}
	for k := range toolKinds {
		if _, ok := approvalKinds[k]; !ok {
			t.Errorf("tool kind %s has an item kind but no approval kind", k)
		}
	}
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
