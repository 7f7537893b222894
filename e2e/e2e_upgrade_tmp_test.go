package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/daemon"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EUpgradeStaleHandoffTemps: a handoff's temp file left by an image
// killed while writing it (upgrade-handoff.json.<pid>.<ns>.tmp), and one
// an image read and died adopting (upgrade-handoff.json.<pid>.<ns>.consumed),
// are removed at the next start, with a log line naming each; only a regular file of
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
	consumed := filepath.Join(dir, daemon.HandoffFile+".4243.1764620000000000001.consumed") // read by an image that died adopting it
	if err := os.WriteFile(consumed, []byte(`{"format":"sessiond-handoff/1"}`), 0o600); err != nil {
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
	if _, err := os.Lstat(consumed); !os.IsNotExist(err) {
		t.Fatalf("the consumed handoff %s: %v; want it removed\n%s", consumed, err, d.Log.String())
	}
	for p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("%s was not left alone: %v", p, err)
		}
	}
}

// TestE2EUpgradeLeavesNoHandoff: after live upgrades the state directory
// holds no handoff: the new image moves the file it read aside and
// removes it once it accepts (off the upgrade's pause: freeing its blocks
// may wait for the device).
func TestE2EUpgradeLeavesNoHandoff(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	dir := t.TempDir()
	d := daemontest.Start(t, daemontest.Options{StateDir: dir})
	c := d.Client(t)
	for range 2 {
		var res api.UpgradeResult
		if err := c.Call(ctxN(t, 60*time.Second), "daemon.upgrade", api.UpgradeParams{Binary: v2}, &res); err != nil {
			t.Fatalf("upgrade: %v\n%s", err, d.Log.String())
		}
		c = d.Client(t)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), daemon.HandoffFile) {
				left = append(left, e.Name())
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("handoff files left in the state directory after the upgrades: %v\n%s", left, d.Log.String())
		}
		time.Sleep(10 * time.Millisecond) // the removal runs on its own goroutine; no signal of it
	}
}
