package host

import (
	"context"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// TestSendFailsWhenDedupLookupFails: a clientMessageId lookup the store
// cannot answer fails the send; it is never taken for a new message (which
// would send it twice).
func TestSendFailsWhenDedupLookupFails(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	a, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "hello", ClientMessageID: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnCompleted && ev.TurnID == a.TurnID })
	// Damage the dedup index: the bucket becomes a plain value.
	if err := f.st.DB.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(store.BucketJournal).Bucket([]byte(id))
		if err := b.DeleteBucket([]byte("dedup")); err != nil {
			return err
		}
		return b.Put([]byte("dedup"), []byte("damaged"))
	}); err != nil {
		t.Fatal(err)
	}
	r, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "hello", ClientMessageID: "m1"})
	if err == nil || !strings.Contains(err.Error(), "clientMessageId lookup") {
		t.Fatalf("retried send over a damaged dedup index answered %+v, %v; want the lookup's error", r, err)
	}
	// It failed at the lookup: the message was never handed on as new
	// (here the store refused the write too; after a transient read
	// failure it would have been sent twice).
	if st := f.j.Stats(); st.Isolated != 0 || st.Failed != 0 {
		t.Fatalf("the retried message reached the journal's writer: %+v", st)
	}
	n := 0
	for _, typ := range f.types(id) {
		if typ == event.TurnStarted {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d turn.started rows, want 1", n)
	}
}
