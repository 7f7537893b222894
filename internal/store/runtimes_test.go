package store

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestMigrationAddsRuntimes: a store at schema 2 (before runtimes/) gets
// the bucket on its next open, so a runtime record can be written.
func TestMigrationAddsRuntimes(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = s.DB.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(BucketRuntimes); err != nil {
			return err
		}
		return tx.Bucket(BucketMeta).Put(keySchemaVersion, U64(2))
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutRuntime(RuntimeRecord{ID: "r_1", Profile: "codex", Account: "default"}); err != nil {
		t.Fatalf("after migrating schema 2: %v", err)
	}
}

// TestRuntimeRecords: put, rewrite the sessions, list, delete; a record
// that no longer decodes is reported naming its runtime and skipped.
func TestRuntimeRecords(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := RuntimeRecord{ID: "r_a", Profile: "codex", Account: "default", Sessions: []string{"s_2", "s_1"},
		Owner: RuntimeOwner{PID: 42, StartTicks: 7, BootID: "b", SpawnToken: "t"}, StartedAt: time.Unix(1, 0).UTC()}
	if err := s.PutRuntime(r); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRuntimeSessions("r_a", []string{"s_3"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRuntimeSessions("r_none", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("sessions of a missing record: %v", err)
	}
	got, err := s.GetRuntime("r_a")
	if err != nil || got.Owner != r.Owner || !slices.Equal(got.Sessions, []string{"s_3"}) || !got.StartedAt.Equal(r.StartedAt) {
		t.Fatalf("get %+v %v", got, err)
	}
	s.DB.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(BucketRuntimes).Put([]byte("r_bad"), []byte(`{"runtimeId":"r_b`))
	})
	var bad []string
	list, err := s.ListRuntimes(func(id string, err error) {
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), id) {
			t.Errorf("damaged record %s: %v", id, err)
		}
		bad = append(bad, id)
	})
	if err != nil || len(list) != 1 || list[0].ID != "r_a" || !slices.Equal(bad, []string{"r_bad"}) {
		t.Fatalf("list %+v bad %v err %v", list, bad, err)
	}
	if _, err := s.GetRuntime("r_bad"); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "r_bad") {
		t.Fatalf("get damaged: %v", err)
	}
	for _, id := range []string{"r_a", "r_bad", "r_none"} {
		if err := s.DeleteRuntime(id); err != nil {
			t.Fatal(err)
		}
	}
	if list, _ := s.ListRuntimes(nil); len(list) != 0 {
		t.Fatalf("after delete: %+v", list)
	}
}
