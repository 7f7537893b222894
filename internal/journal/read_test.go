package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

func TestReadPagingAndCursorErrors(t *testing.T) {
	j, _ := open(t, Options{MaxEvents: 10})
	ctx := context.Background()
	for i := range 25 {
		if _, err := j.Append(ctx, "sess-page", delta("", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	st := j.State("sess-page")
	if st.LastSeq != 25 || st.OldestSeq != 16 {
		t.Fatalf("state: %+v", st)
	}
	tests := []struct {
		name     string
		after    uint64
		limit    int
		want     []uint64
		more     bool
		kind     error
		dataWant uint64
	}{
		{"page", 15, 4, seqRange(16, 19), true, nil, 0},
		{"rest", 19, 100, seqRange(20, 25), false, nil, 0},
		{"at end", 25, 10, nil, false, nil, 0},
		{"ahead", 26, 10, nil, false, ErrCursorAhead, 25},
		{"compacted", 3, 10, nil, false, ErrCursorCompacted, 16},
		{"just compacted", 14, 10, nil, false, ErrCursorCompacted, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, last, more, err := j.Read("sess-page", tc.after, tc.limit)
			if tc.kind != nil {
				var ce *CursorError
				at := uint64(0)
				if errors.As(err, &ce) {
					at = max(ce.LastSeq*boolU(tc.kind == ErrCursorAhead), ce.OldestSeq*boolU(tc.kind == ErrCursorCompacted))
				}
				if !errors.Is(err, tc.kind) || ce == nil || at != tc.dataWant {
					t.Fatalf("err = %#v", err)
				}
				return
			}
			if err != nil || last != 25 || more != tc.more || !slices.Equal(seqs(evs), tc.want) {
				t.Fatalf("read: %v %d %v %v", seqs(evs), last, more, err)
			}
		})
	}
	if _, _, _, err := j.Read("sess-none", 1, 10); !errors.Is(err, ErrCursorAhead) {
		t.Fatalf("unknown session ahead: %v", err)
	}
}

func TestRetentionKeepsOpenTurnStart(t *testing.T) {
	j, st := open(t, Options{MaxEvents: 5})
	ctx := context.Background()
	mustAppend(t, j, "sess-ret", delta("", "before"))
	mustAppend(t, j, "sess-ret", event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "hi"}))
	for i := range 10 {
		mustAppend(t, j, "sess-ret", delta("t1", fmt.Sprint(i)))
	}
	s := j.State("sess-ret")
	if s.OldestSeq != 2 || s.LastSeq != 12 || s.OpenTurn != "t1" || s.OpenTurnSeq != 2 {
		t.Fatalf("state with an open turn: %+v", s)
	}
	evs, _, _, err := j.Read("sess-ret", 1, 100)
	if err != nil || evs[0].Type != event.TurnStarted || len(evs) != 11 {
		t.Fatalf("read: %v %v", seqs(evs), err)
	}
	if _, err := j.Append(ctx, "sess-ret", event.New(event.TurnCompleted, "t1", event.TurnCompletedData{Status: event.StatusCompleted})); err != nil {
		t.Fatal(err)
	}
	s = j.State("sess-ret")
	if s.OldestSeq != 9 || s.LastSeq != 13 || s.OpenTurn != "" {
		t.Fatalf("state after the turn: %+v", s)
	}
	// The dropped rows are gone from the file, not only hidden.
	n := 0
	_ = st.DB.View(func(tx *bolt.Tx) error {
		n = sessionBucket(tx, "sess-ret").Bucket(keyEvents).Stats().KeyN
		return nil
	})
	if n != 5 {
		t.Fatalf("%d rows kept, want 5", n)
	}
}

func mustAppend(t testing.TB, j *Journal, id string, ds ...event.Draft) []event.Event {
	t.Helper()
	evs, err := j.Append(context.Background(), id, ds...)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestGarbageRowsSkippedAndLoggedOnce: a key that is no seq is skipped; a
// row that does not decode reads as journal.corrupt in its place; each is
// logged once.
func TestGarbageRowsSkippedAndLoggedOnce(t *testing.T) {
	var logs syncBuf
	j, st := open(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	id := "sess-garbage"
	mustAppend(t, j, id, delta("", "a"), delta("", "b"), delta("", "c"))
	if err := st.DB.Update(func(tx *bolt.Tx) error {
		evb := sessionBucket(tx, id).Bucket(keyEvents)
		if err := evb.Put([]byte{0, 0, 0, 0, 0, 0, 0, 1, 9}, []byte("{}")); err != nil { // a key that is no seq
			return err
		}
		return evb.Put(store.U64(2), []byte("\x00not json"))
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		evs, last, more, err := j.Read(id, 0, 10)
		if err != nil || last != 3 || more || !slices.Equal(seqs(evs), []uint64{1, 2, 3}) || evs[1].Type != event.JournalCorrupt {
			t.Fatalf("read: %v %d %v %v", seqs(evs), last, more, err)
		}
	}
	if n := strings.Count(logs.String(), "does not decode"); n != 2 {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
}

// TestOpenRebuildsMissingMeta: a session whose meta bucket is gone (a file
// written by something else) gets its derived state back from its events.
func TestOpenRebuildsMissingMeta(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	defer st.Close()
	j, err := Open(st.DB, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "sess-rebuild"
	mustAppend(t, j, id, delta("", "x"),
		event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1"}),
		event.New(event.ApprovalRequested, "t1", event.ApprovalRequestedData{RequestID: "r1"}))
	j.Close()
	if err := st.DB.Update(func(tx *bolt.Tx) error { return sessionBucket(tx, id).DeleteBucket(keyMeta) }); err != nil {
		t.Fatal(err)
	}
	j, err = Open(st.DB, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	want := State{LastSeq: 3, OldestSeq: 1, OpenTurn: "t1", OpenTurnSeq: 2, PendingApprovals: []string{"r1"}}
	if got := j.State(id); !stateEqual(got, want) {
		t.Fatalf("rebuilt %+v, want %+v", got, want)
	}
	if evs := mustAppend(t, j, id, delta("t1", "y")); evs[0].Seq != 4 {
		t.Fatalf("seq after rebuild: %d", evs[0].Seq)
	}
}

func boolU(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
