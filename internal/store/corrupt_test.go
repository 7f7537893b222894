package store

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"
)

// filledStore writes a store with nested, inline and page-sized buckets
// and values large enough for overflow pages, closes it and returns its
// bytes and page size.
func filledStore(t testing.TB) ([]byte, int) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = s.DB.Update(func(tx *bolt.Tx) error {
		j := tx.Bucket(BucketJournal)
		for i := range 30 {
			sb, err := j.CreateBucket(fmt.Appendf(nil, "s_%08d", i))
			if err != nil {
				return err
			}
			evs, _ := sb.CreateBucket([]byte("events"))
			n := 2 // inline
			if i%3 == 0 {
				n = 60 // own pages
			}
			for k := range n {
				v := bytes.Repeat([]byte{byte('a' + k%26)}, 100+k*7)
				if i == 9 && k == 0 {
					v = bytes.Repeat([]byte("big"), 5000) // overflow pages
				}
				if err := evs.Put(U64(uint64(k+1)), v); err != nil {
					return err
				}
			}
			tx.Bucket(BucketSessions).Put(fmt.Appendf(nil, "s_%08d", i), []byte(`{"id":"x"}`))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := os.ReadFile(filepath.Join(dir, dbName))
	if err != nil {
		t.Fatal(err)
	}
	return b, os.Getpagesize()
}

// openBytes writes b as the store of a fresh state dir (with a marker: the
// dir was used) and opens it.
func openBytes(t testing.TB, b []byte, readOnly bool) (string, *Store, error) {
	dir := t.TempDir()
	path := filepath.Join(dir, dbName)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	writeMarker(dir, marker{StateID: "test"})
	var s *Store
	var err error
	if readOnly {
		s, err = OpenReadOnly(dir, time.Second)
	} else {
		s, err = Open(dir, time.Second)
	}
	return path, s, err
}

func TestOpenRefusesDamage(t *testing.T) {
	good, ps := filledStore(t)
	putMeta := func(b []byte, page int, f func(m []byte)) {
		m := b[page*ps+pageHeaderSize:]
		f(m)
	}
	tests := []struct {
		name, want string
		damage     func(b []byte) []byte
	}{
		{"truncated by one page", "truncated", func(b []byte) []byte { return b[:hwm(t, b, ps)*ps-ps] }},
		{"shorter than a meta page", "truncated", func(b []byte) []byte { return b[:100] }},
		{"zeroed after 4 KiB", "", func(b []byte) []byte { clear(b[4096:]); return b }},
		{"both meta checksums", "no valid meta page", func(b []byte) []byte {
			putMeta(b, 0, func(m []byte) { m[56] ^= 1 })
			putMeta(b, 1, func(m []byte) { m[56] ^= 1 })
			return b
		}},
		{"root page id", "", func(b []byte) []byte {
			for _, p := range []int{0, 1} { // a valid checksum over a root pointing at a leaf's neighbour
				putMeta(b, p, func(m []byte) { ne.PutUint64(m[16:], ne.Uint64(m[16:])+1); resum(m) })
			}
			return b
		}},
		{"freelist names the root page", "consistency check", func(b []byte) []byte {
			// In range for the walk; only bbolt's check sees a page both
			// reachable and free.
			for _, p := range []int{0, 1} {
				putMeta(b, p, func(m []byte) {
					fl := b[int(ne.Uint64(m[32:]))*ps:]
					ne.PutUint16(fl[10:], 1)
					ne.PutUint64(fl[pageHeaderSize:], ne.Uint64(m[16:]))
				})
			}
			return b
		}},
		{"branch page points to itself", "", func(b []byte) []byte {
			id := branchPage(t, b)
			ne.PutUint64(b[id*ps+pageHeaderSize+8:], uint64(id)) // first element's child
			return b
		}},
		{"page size", "page size", func(b []byte) []byte {
			for _, p := range []int{0, 1} {
				putMeta(b, p, func(m []byte) { ne.PutUint32(m[8:], 3000); resum(m) })
			}
			return b
		}},
	}
	for _, tc := range tests {
		for _, ro := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/readonly=%v", tc.name, ro), func(t *testing.T) {
				b := tc.damage(bytes.Clone(good))
				path, s, err := openBytes(t, b, ro)
				if err == nil {
					s.Close()
				}
				var ref *RefusalError
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ref) || !strings.Contains(err.Error(), tc.want) ||
					!strings.HasPrefix(ref.Fix, "mv "+path+" "+path+".corrupt-") {
					t.Fatalf("open: %v, want ErrCorrupt containing %q and a mv fix", err, tc.want)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, b) {
					t.Fatal("the refused file was changed")
				}
			})
		}
	}
}

// hwm is the high water mark of the newer meta page of b.
func hwm(t *testing.T, b []byte, ps int) int {
	m0, err0 := decodeMeta(b[pageHeaderSize:], 0)
	m1, err1 := decodeMeta(b[ps+pageHeaderSize:], 1)
	if err0 != nil || err1 != nil {
		t.Fatal(err0, err1)
	}
	if m1.txid > m0.txid {
		return int(m1.pgid)
	}
	return int(m0.pgid)
}

// branchPage returns a reachable branch page of the store b.
func branchPage(t *testing.T, b []byte) int {
	p := filepath.Join(t.TempDir(), "copy.db")
	os.WriteFile(p, b, 0o600)
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	found := 0
	db.View(func(tx *bolt.Tx) error {
		for id := 2; found == 0; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			if info.Type == "branch" {
				found = id
			}
		}
		return nil
	})
	if found == 0 {
		t.Fatal("no branch page")
	}
	return found
}

// resum recomputes a meta's checksum after an edit.
func resum(m []byte) {
	h := fnv.New64a()
	h.Write(m[:56])
	ne.PutUint64(m[56:], h.Sum64())
}

// TestOpenFallsBackFromOneDamagedMeta: one bad meta page is what bbolt is
// built to survive (a torn write): the store opens from the other, with
// a warning.
func TestOpenFallsBackFromOneDamagedMeta(t *testing.T) {
	good, ps := filledStore(t)
	for page := range 2 {
		b := bytes.Clone(good)
		b[page*ps+pageHeaderSize+56] ^= 0xff
		_, s, err := openBytes(t, b, false)
		if err != nil {
			t.Fatalf("meta %d damaged: %v", page, err)
		}
		// (the store is a copy made by the test: its move warning is expected too)
		metaW := slices.DeleteFunc(slices.Clone(s.Warnings), func(w string) bool { return strings.Contains(w, "moved or copied") })
		if len(metaW) != 1 || !strings.Contains(metaW[0], fmt.Sprintf("meta page %d: checksum", page)) {
			t.Errorf("meta %d damaged: warnings %q", page, s.Warnings)
		}
		s.Close()
	}
}

// TestRandomDamageNeverCrashes: bytes flipped anywhere in the file (page
// headers and elements most often), pages zeroed, the file cut: Open and
// OpenReadOnly return, never crash; what they open reads in full; what
// they refuse is left unchanged.
func TestRandomDamageNeverCrashes(t *testing.T) {
	good, ps := filledStore(t)
	pages := len(good) / ps
	rapid.Check(t, func(rt *rapid.T) {
		b := bytes.Clone(good)
		for range rapid.IntRange(1, 12).Draw(rt, "damages") {
			p := rapid.IntRange(0, pages-1).Draw(rt, "page")
			switch rapid.IntRange(0, 9).Draw(rt, "kind") {
			case 0:
				clear(b[p*ps : (p+1)*ps])
			case 1, 2, 3, 4, 5:
				b[p*ps+rapid.IntRange(0, 63).Draw(rt, "head")] = rapid.Byte().Draw(rt, "v")
			default:
				b[p*ps+rapid.IntRange(0, ps-1).Draw(rt, "off")] = rapid.Byte().Draw(rt, "v")
			}
		}
		if rapid.IntRange(0, 9).Draw(rt, "cut") == 0 {
			b = b[:rapid.IntRange(1, len(b)-1).Draw(rt, "size")]
		}
		for _, ro := range []bool{true, false} {
			path, s, err := openBytes(t, b, ro)
			if err != nil {
				if after, _ := os.ReadFile(path); errors.Is(err, ErrCorrupt) && !bytes.Equal(after, b) {
					rt.Fatalf("readonly=%v: refused (%v) but changed", ro, err)
				}
				continue
			}
			readAll(rt, s.DB)
			s.Close()
		}
	})
}

// readAll reads every key and value of every bucket.
func readAll(t interface{ Fatalf(string, ...any) }, db *bolt.DB) {
	var walk func(b *bolt.Bucket) int
	walk = func(b *bolt.Bucket) int {
		n := 0
		b.ForEach(func(k, v []byte) error {
			for _, c := range k {
				n += int(c)
			}
			if v == nil {
				n += walk(b.Bucket(k))
			}
			for _, c := range v {
				n += int(c)
			}
			return nil
		})
		return n
	}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { walk(b); return nil })
	})
	if err != nil {
		t.Fatalf("read all: %v", err)
	}
}

// TestLostStoreRefused: a missing or empty sessiond.db in a state dir
// used before (marker, or provider dirs of a dir older than the marker)
// is refused; a file moved aside under an aside name lets the next open
// start an empty store, once; a dir never used starts empty.
func TestLostStoreRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, dbName)
	open := func() (*Store, error) { return Open(dir, time.Second) }
	s, err := open()
	if err != nil || len(s.Warnings) != 0 {
		t.Fatalf("fresh dir: %v %v", err, s)
	}
	id := s.StateID
	s.Close()
	if m, ok, _ := readMarker(dir); !ok || m.StateID != id {
		t.Fatalf("marker %+v %v, want state id %s", m, ok, id)
	}
	mustRefuse := func(what, fix string) {
		t.Helper()
		before, statErr := os.ReadFile(path)
		for _, ro := range []bool{false, true} {
			var err error
			if ro {
				_, err = OpenReadOnly(dir, time.Second)
			} else {
				_, err = open()
			}
			var ref *RefusalError
			if !errors.Is(err, ErrLost) || !errors.As(err, &ref) || !strings.HasPrefix(ref.Fix, fix) {
				t.Fatalf("%s (readonly=%v): %v, want ErrLost with fix %q", what, ro, err, fix)
			}
		}
		after, err := os.ReadFile(path)
		if os.IsNotExist(statErr) != os.IsNotExist(err) || !bytes.Equal(before, after) {
			t.Fatalf("%s: the file changed", what)
		}
	}
	os.Truncate(path, 0)
	mustRefuse("empty", "mv "+path+" "+path+".corrupt-")
	os.Remove(path)
	mustRefuse("missing", "restore "+path)

	os.WriteFile(path+".lost-1", nil, 0o600) // what the fix says to touch
	if _, err := OpenReadOnly(dir, time.Second); !errors.Is(err, ErrNoStore) {
		t.Fatalf("read-only open after the loss was acknowledged: %v, want ErrNoStore", err)
	}
	s, err = open()
	if err != nil || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], path+".lost-1") {
		t.Fatalf("open after the loss was acknowledged: %v %+v", err, s)
	}
	s.Close()
	os.Remove(path) // the acknowledgement is used up
	mustRefuse("missing again", "restore "+path)

	legacy := t.TempDir() // a state dir from before the marker
	os.MkdirAll(filepath.Join(legacy, "providers", "echo"), 0o700)
	if _, err := Open(legacy, time.Second); !errors.Is(err, ErrLost) {
		t.Fatalf("missing store next to providers/: %v, want ErrLost", err)
	}
	if _, err := os.Stat(filepath.Join(legacy, dbName)); !os.IsNotExist(err) {
		t.Fatal("the refused open created the file")
	}
	empty := t.TempDir() // a first start that died before bbolt wrote a page
	os.WriteFile(filepath.Join(empty, dbName), nil, 0o600)
	if s, err := Open(empty, time.Second); err != nil {
		t.Fatalf("empty file in an unused dir: %v", err)
	} else {
		s.Close()
	}
}
