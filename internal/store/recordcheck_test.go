package store

import (
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestCheckRecordAnswersAsGetRecord: CheckRecord gives GetRecord's answer
// for a record as it is now, also after its bytes changed under a check
// that had found it whole: damaged in place (same length and not), type
// wrong but valid JSON, rewritten whole again, deleted, put back.
func TestCheckRecordAnswersAsGetRecord(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const id = "s_aaaaaaaa"
	put := func(raw string) {
		t.Helper()
		if err := s.DB.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(BucketSessions).Put([]byte(id), []byte(raw))
		}); err != nil {
			t.Fatal(err)
		}
	}
	agree := func(step string, want error) {
		t.Helper()
		for range 2 { // the second check is the one a memory would answer
			_, gerr := s.GetRecord(id)
			cerr := s.CheckRecord(id)
			if !errors.Is(gerr, want) || !errors.Is(cerr, want) || (want == nil) != (cerr == nil) {
				t.Fatalf("%s: GetRecord %v, CheckRecord %v, want %v", step, gerr, cerr, want)
			}
		}
	}
	agree("absent", ErrNotFound)
	if err := s.PutRecord(Record{ID: id, Provider: "echo", Cwd: "/"}); err != nil {
		t.Fatal(err)
	}
	agree("put", nil)
	whole := `{"id":"s_aaaaaaaa","provider":"echo","cwd":"/"}`
	put(`{"id":"s_aaaaaaaa","provider":"echo","cwd":"/"` + "x") // same length + 0, damaged
	agree("damaged", ErrDamaged)
	put(whole)
	agree("whole again", nil)
	put(`{"id":"s_aaaaaaaa","provider":"echo","cwd":7}`) // valid JSON, wrong type
	agree("wrong type", ErrDamaged)
	put(whole)
	agree("whole once more", nil)
	put(`{"id":"s_aaaaaaaa","provider":"echo","cwd":"/"`) // truncated
	agree("truncated", ErrDamaged)
	put(whole)
	agree("whole after truncated", nil)
	put(`{"id":"s_aaaXaaaa","provider":"echo","cwd":"/"}`) // a byte of its id flipped: another session's name
	agree("id of another", ErrDamaged)
	var bad []string
	if recs, err := s.ListRecords(func(id string, err error) { bad = append(bad, id) }); err != nil || len(recs) != 0 || len(bad) != 1 {
		t.Fatalf("ListRecords with the id flipped: %d records, bad %v, %v; want it reported damaged", len(recs), bad, err)
	}
	if err := s.DeleteRecord(id); err != nil {
		t.Fatal(err)
	}
	agree("deleted", ErrNotFound)
	put(whole)
	agree("put back", nil)
	// A deleted session's bytes are not kept: the memory holds only
	// records that exist, whatever is checked after.
	if err := s.DeleteRecord(id); err != nil {
		t.Fatal(err)
	}
	if n := len(s.checked.raw); n != 0 {
		t.Fatalf("CheckRecord still remembers %d records after the delete", n)
	}
}
