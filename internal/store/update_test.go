package store

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
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

// TestUnmappedStoreIsUnavailable: the errors bbolt returns for a store it
// cannot use (not mapped after a remap failed on EIO, its mapping failing
// to grow, closed) are ErrUnavailable, from writes and from reads alike,
// naming the file; an error of fn still passes through.
func TestUnmappedStoreIsUnavailable(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, cause := range []error{
		berrors.ErrInvalidMapping,
		fmt.Errorf("mmap allocate error: %s", syscall.EIO),
		berrors.ErrDatabaseNotOpen,
	} {
		err := unavailable(s.DB, cause)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), s.DB.Path()) || !IsUnavailable(cause) {
			t.Fatalf("%v: %v, want ErrUnavailable naming %s", cause, err, s.DB.Path())
		}
	}
	if IsUnavailable(errors.New("some bug")) || IsUnavailable(nil) {
		t.Fatal("an unrelated error taken for an unavailable store")
	}
	mine := errors.New("refused by fn")
	if err := View(s.DB, func(*bolt.Tx) error { return mine }); err != mine {
		t.Fatalf("fn's error: %v, want it as is", err)
	}
	s.Close()
	if err := View(s.DB, func(*bolt.Tx) error { return nil }); !errors.Is(err, ErrUnavailable) || !errors.Is(err, berrors.ErrDatabaseNotOpen) {
		t.Fatalf("View of a closed store: %v, want ErrUnavailable wrapping bbolt's error", err)
	}
	if _, err := s.GetRecord("s_aaaaaaaa"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("GetRecord on a closed store: %v", err)
	}
	if _, err := s.ListRecords(nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ListRecords on a closed store: %v", err)
	}
}
