package codex

import (
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// TestNotificationCoverage walks the pinned codex's generated schema: every
// ServerNotification method is mapped, ignored (with a reason) or a notice
// — exactly one of the three — and every ServerRequest is relayed or
// refused. A codex upgrade that adds a method turns this red.
func TestNotificationCoverage(t *testing.T) {
	for _, m := range codextest.Methods(t, "ServerNotification.json") {
		_, mapped := notifyMapped[m]
		reason, ignored := notifyIgnored[m]
		_, notice := notifyNotices[m]
		n := 0
		for _, b := range []bool{mapped, ignored, notice} {
			if b {
				n++
			}
		}
		switch {
		case n == 0:
			t.Errorf("notification %s is neither mapped, ignored nor a notice", m)
		case n > 1:
			t.Errorf("notification %s is in %d of the lists", m, n)
		case ignored && reason == "":
			t.Errorf("notification %s is ignored without a reason", m)
		}
	}
	for _, m := range codextest.Methods(t, "ServerRequest.json") {
		_, relayed := requestRelayed[m]
		_, refused := requestRefused[m]
		if relayed == refused {
			t.Errorf("request %s: relayed %v, refused %v; want exactly one", m, relayed, refused)
		}
	}
}

// TestCoverageTablesHaveNoStrangers: a method in our tables that the
// schema does not list is a typo or a removed method.
func TestCoverageTablesHaveNoStrangers(t *testing.T) {
	known := map[string]bool{}
	for _, f := range []string{"ServerNotification.json", "ServerRequest.json"} {
		for _, m := range codextest.Methods(t, f) {
			known[m] = true
		}
	}
	for _, tbl := range []map[string]bool{keys(notifyMapped), keys(notifyIgnored), keys(notifyNotices), keys(requestRelayed), keys(requestRefused)} {
		for m := range tbl {
			if !known[m] {
				t.Errorf("%s is in an adapter table but not in codex %s's schema", m, codextest.Version)
			}
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
