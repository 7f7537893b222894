package store

import (
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// TestUpdateWrapsStoreFailures: an error bbolt itself returns (here: the
// file is closed; on a full disk the commit's write) wraps ErrUnavailable
// and keeps its cause; an error of fn passes through unwrapped; records
// written through the store say so too.
func TestUpdateWrapsStoreFailures(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mine := errors.New("refused by fn")
	if err := Update(s.DB, func(*bolt.Tx) error { return mine }); err != mine {
		t.Fatalf("fn's error: %v, want it as is", err)
	}
	if err := Update(s.DB, func(tx *bolt.Tx) error { return tx.Bucket(BucketMeta).Put([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	err = Update(s.DB, func(*bolt.Tx) error { return nil })
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, berrors.ErrDatabaseNotOpen) {
		t.Fatalf("closed store: %v, want ErrUnavailable wrapping bbolt's error", err)
	}
	if err := s.PutRecord(Record{ID: "s_aaaaaaaa"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PutRecord on a closed store: %v", err)
	}
}
