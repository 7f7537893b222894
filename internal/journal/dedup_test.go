package journal

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// TestLookupClientMessageErrors: a dedup index the store cannot answer
// for is an error, never "not found".
func TestLookupClientMessageErrors(t *testing.T) {
	const id = "sess-dedup"
	damage := func(f func(b *bolt.Bucket) error) func(t *testing.T, j *Journal, db *bolt.DB) {
		return func(t *testing.T, j *Journal, db *bolt.DB) {
			if err := db.Update(func(tx *bolt.Tx) error {
				return f(tx.Bucket(store.BucketJournal).Bucket([]byte(id)))
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		breakf func(t *testing.T, j *Journal, db *bolt.DB)
		want   error
	}{
		{"index is a value", damage(func(b *bolt.Bucket) error {
			if err := b.DeleteBucket(keyDedup); err != nil {
				return err
			}
			return b.Put(keyDedup, []byte("x"))
		}), ErrDedupDamaged},
		{"entry is a bucket", damage(func(b *bolt.Bucket) error {
			d := b.Bucket(keyDedup)
			if err := d.Delete([]byte("m1")); err != nil {
				return err
			}
			_, err := d.CreateBucket([]byte("m1"))
			return err
		}), ErrDedupDamaged},
		{"entry is empty", damage(func(b *bolt.Bucket) error { return b.Bucket(keyDedup).Put([]byte("m1"), []byte{}) }), ErrDedupDamaged},
		{"database closed", func(t *testing.T, j *Journal, db *bolt.DB) { db.Close() }, berrors.ErrDatabaseNotOpen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, st := open(t, Options{})
			if _, err := j.Append(context.Background(), id, event.New(event.TurnStarted, "t1",
				event.TurnStartedData{TurnID: "t1", Text: "x", ClientMessageID: "m1"})); err != nil {
				t.Fatal(err)
			}
			if turn, ok, err := j.LookupClientMessage(id, "m1"); turn != "t1" || !ok || err != nil {
				t.Fatalf("lookup before: %q %v %v", turn, ok, err)
			}
			tc.breakf(t, j, st.DB)
			turn, ok, err := j.LookupClientMessage(id, "m1")
			if !errors.Is(err, tc.want) || ok || turn != "" {
				t.Fatalf("lookup after: %q %v %v, want %v", turn, ok, err, tc.want)
			}
		})
	}
	j, _ := open(t, Options{})
	if _, _, err := j.LookupClientMessage(id, strings.Repeat("m", MaxClientMessageIDBytes+1)); !errors.Is(err, ErrBadDraft) {
		t.Fatalf("over-long id: %v", err)
	}
}
