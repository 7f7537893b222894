package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/daemon"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EUpgradeStaleHandoffTemps: a handoff's temp file left by an image
// killed while writing it (upgrade-handoff.json.<pid>.<ns>.tmp) is removed
// at the next start, with a log line naming it; only a regular file of
// that exact name pattern: a symlink (and what it points to), a
// directory and another name are left alone.
func TestE2EUpgradeStaleHandoffTemps(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, daemon.HandoffFile+".4242.1764620000000000000.tmp")
	kept := map[string]bool{}
	if err := os.WriteFile(stale, []byte(`{"format":"sessiond-handoff/1"`), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, daemon.HandoffFile+".1.2.tmp")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, daemon.HandoffFile+".3.4.tmp")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, daemon.HandoffFile+".x.tmp")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, sub, other, victim} {
		kept[p] = true
	}
	d := daemontest.Start(t, daemontest.Options{StateDir: dir})
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale temp file %s: %v; want it removed\n%s", stale, err, d.Log.String())
	}
	if !strings.Contains(d.Log.String(), filepath.Base(stale)) {
		t.Fatalf("no log line names %s:\n%s", stale, d.Log.String())
	}
	for p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("%s was not left alone: %v", p, err)
		}
	}
}
