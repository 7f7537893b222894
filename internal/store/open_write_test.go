package store_test

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/internal/store"
)

// txID is the store's last committed write transaction.
func txID(t *testing.T, s *store.Store) int {
	t.Helper()
	var id int
	if err := s.DB.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestOpenCurrentStoreWritesNothing: opening a store that is at the
// schema version, with its home and marker in step, commits no write
// transaction (each would end in an fdatasync on every start, a live
// upgrade's new image included); a new store is written once, migrated.
func TestOpenCurrentStoreWritesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	created := txID(t, s)
	if created == 0 {
		t.Fatal("a new store was not migrated (no write transaction)")
	}
	s.Close()
	s, err = store.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := txID(t, s); got != created {
		t.Fatalf("reopening a current store committed %d write transactions", got-created)
	}
	if s.StateID == "" {
		t.Fatal("the reopened store has no state id")
	}
}
