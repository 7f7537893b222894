package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/ctl"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// usedStateDir runs the real daemon once: 40 sessions with 1 KiB titles,
// one of them held (its echo child makes providers/echo), then a clean
// stop. It returns the state dir.
func usedStateDir(t *testing.T) string {
	t.Helper()
	d := daemontest.Start(t, daemontest.Options{})
	c := d.Client(t)
	var first api.SessionInfo
	for i := range 40 {
		var s api.SessionInfo
		p := api.CreateParams{Provider: "echo", Cwd: t.TempDir(), Title: strings.Repeat(string(rune('a'+i%26)), 1024)}
		if err := c.Call(ctx10(t), "agentSession.create", p, &s); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = s
		}
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: first.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	d.Stop()
	return d.StateDir
}

// copyStateDir copies a state dir (files and one level of dirs is not
// enough for providers/echo/...: walk it).
func copyStateDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if e.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// reachablePages lists the branch and leaf pages of a healthy db (damage
// to a free page is harmless: nothing reads it).
func reachablePages(t *testing.T, path string) []int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids []int
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return err
			}
			if p.Type == "leaf" || p.Type == "branch" {
				ids = append(ids, id)
			}
		}
	})
	if err != nil || len(ids) < 4 {
		t.Fatalf("%v: only %d reachable pages in %s", err, len(ids), path)
	}
	return ids
}

// damage is one way to break a copied store; it returns false when the
// db should be absent afterwards.
type damage struct {
	name string
	do   func(t *testing.T, path string)
}

func damages(t *testing.T, healthy string) []damage {
	ds := []damage{
		{"truncated-to-half", func(t *testing.T, p string) {
			fi, _ := os.Stat(p)
			if err := os.Truncate(p, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"zeroed-after-4KiB", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			clear(b[4096:])
			os.WriteFile(p, b, 0o600)
		}},
		{"zero-length", func(t *testing.T, p string) { os.Truncate(p, 0) }},
		{"missing", func(t *testing.T, p string) { os.Remove(p) }},
	}
	pages := reachablePages(t, filepath.Join(healthy, "sessiond.db"))
	for seed := uint64(1); seed <= 4; seed++ {
		ds = append(ds, damage{fmt.Sprintf("damaged-pages-seed%d", seed), func(t *testing.T, p string) {
			r := rand.New(rand.NewPCG(seed, 17))
			b, _ := os.ReadFile(p)
			for range 1 + r.IntN(3) {
				off := pages[r.IntN(len(pages))] * os.Getpagesize()
				for i := range 48 { // header (id, flags, count, overflow) and the first elements
					b[off+i] = byte(r.Uint32())
				}
			}
			os.WriteFile(p, b, 0o600)
		}})
	}
	return ds
}

// assertRefusal: exit 1, the file named, the fix line given, no stack.
func assertRefusal(t *testing.T, what string, code int, out, db, fix string) {
	t.Helper()
	if code != exitcode.Error || !strings.Contains(out, db) || !strings.Contains(out, fix) ||
		strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") || strings.Contains(out, "fatal error") {
		t.Fatalf("%s: exit %d (want 1), want %s named and fix %q, no stack; output:\n%s", what, code, db, fix, out)
	}
}

// TestE2ECorruptStoreRefused: serve and doctor on a damaged sessiond.db
// (truncated, zeroed, damaged pages, empty or missing in a used state dir)
// exit 1 with the file named and the fix line, never a panic, and leave
// the file byte for byte as it was. Following the fix starts an empty store.
func TestE2ECorruptStoreRefused(t *testing.T) {
	healthy := usedStateDir(t)
	for _, dm := range damages(t, healthy) {
		t.Run(dm.name, func(t *testing.T) {
			dir := copyStateDir(t, healthy)
			db := filepath.Join(dir, "sessiond.db")
			dm.do(t, db)
			before, statErr := os.ReadFile(db)
			fix := "mv " + db + " " + db + ".corrupt-"
			if dm.name == "missing" {
				fix = "touch " + db + ".lost-"
			}

			code, out := runDaemonExpectExit(t, "--socket", filepath.Join(t.TempDir(), "run", "s.sock"), "--state-dir", dir)
			assertRefusal(t, "serve", code, out, db, fix)
			assertUntouched(t, db, before, statErr)

			code, stdout, stderr := runCtl(t, filepath.Join(t.TempDir(), "none.sock"), t.TempDir(), "--json", "doctor", "--state-dir", dir)
			assertRefusal(t, "doctor", code, stdout+stderr, db, fix)
			var rep ctl.DoctorReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(problemsOf(rep, "store")) != 1 {
				t.Fatalf("doctor --json: %v, want one store problem:\n%s", err, stdout)
			}
			assertUntouched(t, db, before, statErr)
		})
	}
	t.Run("fix-starts-empty", func(t *testing.T) {
		dir := copyStateDir(t, healthy)
		db := filepath.Join(dir, "sessiond.db")
		os.Truncate(db, 4096)
		aside := db + ".corrupt-test"
		if err := os.Rename(db, aside); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(aside)
		d := daemontest.Start(t, daemontest.Options{StateDir: dir})
		if st := d.Status(t); st.Sessions.Stored != 0 {
			t.Fatalf("after the fix: %d sessions, want an empty store", st.Sessions.Stored)
		}
		if !strings.Contains(d.Log.String(), aside) {
			t.Errorf("the fresh start does not name the file moved aside:\n%s", d.Log.String())
		}
		d.Stop()
		if after, _ := os.ReadFile(aside); !bytes.Equal(before, after) {
			t.Fatal("the file moved aside was changed")
		}
		// The new store is remembered: losing it again is refused.
		os.Remove(db)
		code, out := runDaemonExpectExit(t, "--socket", filepath.Join(t.TempDir(), "run", "s.sock"), "--state-dir", dir)
		assertRefusal(t, "serve after losing the new store", code, out, db, "touch "+db+".lost-")
	})
}

func assertUntouched(t *testing.T, db string, before []byte, statErr error) {
	t.Helper()
	after, err := os.ReadFile(db)
	if os.IsNotExist(statErr) {
		if !os.IsNotExist(err) {
			t.Fatalf("%s was created (%d bytes): it was missing", db, len(after))
		}
		return
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("%s changed: %d bytes before, %d after", db, len(before), len(after))
	}
}

// TestE2EFreshStateDirStartsEmpty: a state dir never used (or one with an
// empty sessiond.db and nothing else: a first start that died before bbolt
// wrote its first page) starts an empty store.
func TestE2EFreshStateDirStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "sessiond.db"), nil, 0o600)
	d := daemontest.Start(t, daemontest.Options{StateDir: dir})
	if st := d.Status(t); st.Sessions.Stored != 0 {
		t.Fatalf("%d sessions", st.Sessions.Stored)
	}
	d.Stop()
	d = daemontest.Start(t, daemontest.Options{StateDir: t.TempDir()})
	d.Stop()
}
