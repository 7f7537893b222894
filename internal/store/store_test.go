package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOpenMigratesAndKeepsStateID(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id := s.StateID
	if len(id) != 16 {
		t.Fatalf("state id %q", id)
	}
	s.DB.View(func(tx *bolt.Tx) error {
		if v := Version(tx); v != SchemaVersion {
			t.Errorf("schema version %d, want %d", v, SchemaVersion)
		}
		return nil
	})
	s.Close()
	// A store from before the marker gets one on its next open.
	os.Remove(filepath.Join(dir, markerName))
	s, err = Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m, ok, _ := readMarker(dir); !ok || m.StateID != id {
		t.Fatalf("marker after reopening a store without one: %+v %v", m, ok)
	}
	if s.StateID != id {
		t.Fatalf("state id changed across opens: %q -> %q", id, s.StateID)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Open(dir, 100*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if _, err := OpenReadOnly(dir, 100*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only open beside a writer: %v, want ErrLocked", err)
	}
}

func TestSchemaTooNewRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.DB.Update(func(tx *bolt.Tx) error { return tx.Bucket(BucketMeta).Put(keySchemaVersion, U64(SchemaVersion+1)) })
	s.Close()
	if _, err := Open(dir, time.Second); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

func TestRecordsCRUDAndBadRow(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutRecord(Record{ID: "s_aaaaaaaa", Provider: "echo", Cwd: "/"}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRecord("s_aaaaaaaa", func(r *Record) { r.ThreadID = "thr" }); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetRecord("s_aaaaaaaa"); err != nil || r.ThreadID != "thr" {
		t.Fatalf("get %+v %v", r, err)
	}
	if _, err := s.GetRecord("s_missing0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	s.DB.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(BucketSessions).Put([]byte("s_garbage0"), []byte("{not json"))
	})
	var bad []string
	recs, err := s.ListRecords(func(id string, err error) { bad = append(bad, id) })
	if err != nil || len(recs) != 1 || len(bad) != 1 || bad[0] != "s_garbage0" {
		t.Fatalf("list %v bad %v err %v", recs, bad, err)
	}
	if n, _ := s.CountRecords(); n != 2 {
		t.Fatalf("count %d", n)
	}
	if err := s.DeleteRecord("s_aaaaaaaa"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRecord("s_aaaaaaaa"); !errors.Is(err, ErrNotFound) {
		t.Fatal("record survived delete")
	}
}

// TestMigrationAddsCursorKey: a store at schema 1 (before cursor_key)
// gets a 32-byte cursor_key on its next open and keeps its state id; the
// key then stays the same across opens, so a list cursor signed with it
// outlives a restart. Two stores get different keys.
func TestMigrationAddsCursorKey(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id := s.StateID
	// Back to schema 1: what a build before cursor_key left.
	err = s.DB.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(BucketMeta)
		if err := m.Delete(keyCursorKey); err != nil {
			return err
		}
		return m.Put(keySchemaVersion, U64(1))
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := s.CursorKey
	s.Close()
	if len(key) != cursorKeyLen || s.StateID != id {
		t.Fatalf("after migrating schema 1: cursor key %x, state id %q (was %q)", key, s.StateID, id)
	}
	s, err = Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	again := s.CursorKey
	s.Close()
	if string(again) != string(key) {
		t.Fatalf("cursor key changed across opens: %x -> %x", key, again)
	}
	o, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if string(o.CursorKey) == string(key) {
		t.Fatal("two stores share a cursor key")
	}
}
