package journal

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// storedRow is the bytes bbolt holds for (id, seq).
func storedRow(t *testing.T, db *bolt.DB, id string, seq uint64) []byte {
	t.Helper()
	var v []byte
	db.View(func(tx *bolt.Tx) error {
		v = bytes.Clone(sessionBucket(tx, id).Bucket(keyEvents).Get(store.U64(seq)))
		return nil
	})
	return v
}

// TestRowsHandedOutAsStored: Read, the Subscribe snapshot and the live
// feed hand out each row as stored (Event.Raw), data kept as handed in;
// a row of another shape, or one whose seq disagrees with its key, is
// handed out re-encoded with its key's seq.
func TestRowsHandedOutAsStored(t *testing.T) {
	j, st := open(t, Options{})
	const id = "sess-rows"
	odd := event.Draft{Type: event.MessageDelta, TurnID: "t1", Data: json.RawMessage("{ \"text\" : \"a <b> & c\" }")}
	mustAppend(t, j, id, event.New(event.SessionCreated, "", nil), odd)
	_, _, _, sub, err := j.Subscribe(id, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	mustAppend(t, j, id, odd)
	live, err := sub.Next(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	evs, _, _, _ := j.Read(id, 0, 0)
	snap, _, _, sub2, _ := j.Subscribe(id, 0, 0)
	sub2.Close()
	for name, list := range map[string][]event.Event{"read": evs, "snapshot": snap, "live": {live}} {
		for _, ev := range list {
			if row := storedRow(t, st.DB, id, ev.Seq); len(row) == 0 || !bytes.Equal(ev.Raw, row) {
				t.Fatalf("%s seq %d: Raw %s, stored %s", name, ev.Seq, ev.Raw, row)
			}
		}
	}
	if !bytes.Contains(evs[1].Raw, odd.Data) || string(evs[1].Data) != string(odd.Data) {
		t.Fatalf("data not as handed in: %s", evs[1].Raw)
	}
	// Rows written by something else.
	st.DB.Update(func(tx *bolt.Tx) error {
		b := sessionBucket(tx, id).Bucket(keyEvents)
		b.Put(store.U64(2), []byte(`{"type":"message.delta","seq":2,"sessionId":"sess-rows","at":"2026-01-01T00:00:00Z","data":{"text":"x"}}`))
		return b.Put(store.U64(3), []byte(`{"sessionId":"sess-rows","seq":77,"at":"2026-01-01T00:00:00Z","type":"message.delta"}`))
	})
	evs, _, _, _ = j.Read(id, 1, 0)
	for _, ev := range evs {
		var back event.Event
		if err := json.Unmarshal(ev.Raw, &back); err != nil || back.Seq != ev.Seq || back.Type != event.MessageDelta || back.SessionID != id {
			t.Fatalf("seq %d: Raw %s (%v)", ev.Seq, ev.Raw, err)
		}
	}
	if len(evs) != 2 || evs[1].Seq != 3 || !bytes.HasPrefix(evs[0].Raw, []byte(`{"sessionId":"sess-rows","seq":2,`)) {
		t.Fatalf("re-encoded rows: %v", seqs(evs))
	}
}

// TestRowsFoundInTheFileAreValidated: a row that was in the file at Open,
// in the canonical shape but with data that is not JSON, is never handed
// out (it would break the client's reply), on the first read or later: a
// journal.corrupt event stands in its place, so seq stays gapless.
func TestRowsFoundInTheFileAreValidated(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	defer st.Close()
	j, err := Open(st.DB, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "sess-found"
	mustAppend(t, j, id, delta("t1", "a"), delta("t1", "b"), delta("t1", "c"))
	j.Close()
	if err := st.DB.Update(func(tx *bolt.Tx) error {
		return sessionBucket(tx, id).Bucket(keyEvents).Put(store.U64(3), // the last row found at Open
			[]byte(`{"sessionId":"sess-found","seq":3,"at":"2026-01-01T00:00:00Z","type":"message.delta","data":{"text":"c"]}`))
	}); err != nil {
		t.Fatal(err)
	}
	j, err = Open(st.DB, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	mustAppend(t, j, id, delta("t1", "d"))
	for range 3 {
		evs, _, _, err := j.Read(id, 0, 10)
		if err != nil || !slices.Equal(seqs(evs), []uint64{1, 2, 3, 4}) {
			t.Fatalf("read: %v %v", seqs(evs), err)
		}
		for _, ev := range evs {
			if ev.Raw != nil && !json.Valid(ev.Raw) {
				t.Fatalf("seq %d handed out invalid: %s", ev.Seq, ev.Raw)
			}
		}
		// The damaged row reads as a visible journal.corrupt in its place.
		if evs[2].Type != event.JournalCorrupt || evs[2].Raw != nil || !json.Valid(evs[2].Data) {
			t.Fatalf("seq 3 read as %+v, want journal.corrupt", evs[2])
		}
	}
}
