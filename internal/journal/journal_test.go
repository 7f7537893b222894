package journal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(crashHelper())
	}
	goleak.VerifyTestMain(m)
}

var fixedNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// syncBuf is a log sink safe for the writer goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// open returns a journal over a fresh store, closed at cleanup.
func open(t testing.TB, opts Options) (*Journal, *store.Store) {
	t.Helper()
	st := openStore(t, t.TempDir())
	if opts.Now == nil {
		opts.Now = func() time.Time { return fixedNow }
	}
	j, err := Open(st.DB, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close(); st.Close() })
	return j, st
}

func delta(turn, text string) event.Draft {
	return event.New(event.MessageDelta, turn, event.DeltaData{Text: text})
}

func seqs(evs []event.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestAppendAssignsGaplessSeqs(t *testing.T) {
	j, _ := open(t, Options{})
	ctx := context.Background()
	for _, id := range []string{"sess-aaaa", "sess-bbbb"} {
		evs, err := j.Append(ctx, id, event.New(event.SessionCreated, "", nil), delta("t1", "a"), delta("t1", "b"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seqs(evs), []uint64{1, 2, 3}) || evs[0].SessionID != id || !evs[0].At.Equal(fixedNow) {
			t.Fatalf("%s: %+v", id, evs)
		}
	}
	evs, _ := j.Append(ctx, "sess-aaaa", delta("t1", "c"))
	if evs[0].Seq != 4 {
		t.Fatalf("seq = %d", evs[0].Seq)
	}
	got, last, more, err := j.Read("sess-aaaa", 0, 0)
	if err != nil || last != 4 || more || !slices.Equal(seqs(got), []uint64{1, 2, 3, 4}) {
		t.Fatalf("read: %v %d %v %v", seqs(got), last, more, err)
	}
	if got[3].Type != event.MessageDelta || got[3].TurnID != "t1" || string(got[3].Data) != `{"text":"c"}` {
		t.Fatalf("event: %+v", got[3])
	}
	ids := j.Sessions()
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"sess-aaaa", "sess-bbbb"}) {
		t.Fatalf("sessions: %v", ids)
	}
	if st := j.Stats(); st.Appends != 7 || st.Commits == 0 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestAppendRejectsBadDrafts(t *testing.T) {
	j, _ := open(t, Options{})
	tests := []struct {
		name string
		id   string
		ds   []event.Draft
	}{
		{"empty id", "", []event.Draft{delta("t", "x")}},
		{"no type", "sess-x", []event.Draft{{TurnID: "t"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := j.Append(context.Background(), tc.id, tc.ds...); !errors.Is(err, ErrBadDraft) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestDerivedStatePersists(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	j, err := Open(st.DB, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := "sess-derived"
	mustAppend(t, j, id, event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "a", ClientMessageID: "cm-1"}))
	mustAppend(t, j, id,
		event.New(event.ApprovalRequested, "t1", event.ApprovalRequestedData{RequestID: "r1", Kind: "exec"}),
		event.New(event.ApprovalRequested, "t1", event.ApprovalRequestedData{RequestID: "r2", Kind: "exec"}),
		event.New(event.ApprovalResolved, "t1", event.ApprovalResolvedData{RequestID: "r1", Decision: "approve"}),
		event.New(event.TurnCompleted, "t0", event.TurnCompletedData{Status: event.StatusCompleted}), // another turn: no match
	)
	want := State{LastSeq: 5, OldestSeq: 1, OpenTurn: "t1", OpenTurnSeq: 1, PendingApprovals: []string{"r2"}}
	check := func(j *Journal, when string) {
		t.Helper()
		if got := j.State(id); !stateEqual(got, want) {
			t.Fatalf("%s: state %+v, want %+v", when, got, want)
		}
		if turn, ok, err := j.LookupClientMessage(id, "cm-1"); !ok || turn != "t1" || err != nil {
			t.Fatalf("%s: dedup: %q %v", when, turn, ok)
		}
		if _, ok, err := j.LookupClientMessage(id, "cm-2"); ok || err != nil {
			t.Fatalf("%s: unknown client message found", when)
		}
	}
	check(j, "live")
	j.Close()
	st.Close()

	st = openStore(t, dir)
	defer st.Close()
	// The reopened journal must not scan the events: erase them, keep meta.
	if err := st.DB.Update(func(tx *bolt.Tx) error {
		return sessionBucket(tx, id).DeleteBucket(keyEvents)
	}); err != nil {
		t.Fatal(err)
	}
	j, err = Open(st.DB, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	check(j, "reopened")
	evs := mustAppend(t, j, id, event.New(event.TurnCompleted, "t1", event.TurnCompletedData{Status: event.StatusInterrupted}))
	if evs[0].Seq != 6 {
		t.Fatalf("seq after reopen = %d", evs[0].Seq)
	}
	if s := j.State(id); s.OpenTurn != "" || len(s.PendingApprovals) != 0 {
		t.Fatalf("after turn.completed: %+v", s)
	}
}

func stateEqual(a, b State) bool {
	return a.LastSeq == b.LastSeq && a.OldestSeq == b.OldestSeq && a.OpenTurn == b.OpenTurn &&
		a.OpenTurnSeq == b.OpenTurnSeq && slices.Equal(a.PendingApprovals, b.PendingApprovals)
}

func TestAppendCancelledIsNotCommitted(t *testing.T) {
	j, _ := open(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := j.Append(ctx, "sess-cancel", delta("", "x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if st := j.State("sess-cancel"); st.LastSeq != 0 {
		t.Fatalf("a cancelled append was committed: %+v", st)
	}
}

// TestAppendCancelWhileQueued: a request still queued when its ctx ends is
// withdrawn (never committed); one the writer took is committed.
func TestAppendCancelWhileQueued(t *testing.T) {
	j, st := open(t, Options{})
	mustAppend(t, j, "sess-q", delta("", "first"))
	// Block the writer inside its next commit: hold bbolt's writer lock.
	tx, err := st.DB.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := newRequest("sess-q", []event.Draft{delta("", "taken")})
	if err := j.enqueue(r1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { j.qmu.Lock(); defer j.qmu.Unlock(); return r1.taken })
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { _, err := j.Append(ctx, "sess-q", delta("", "withdrawn")); res <- err }()
	waitFor(t, func() bool { j.qmu.Lock(); defer j.qmu.Unlock(); return len(j.queue) == 1 })
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("withdrawn append: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a cancelled append still waits for a commit that has not started")
	}
	_ = tx.Rollback()
	<-r1.done
	if r1.err != nil {
		t.Fatal(r1.err)
	}
	evs, _, _, _ := j.Read("sess-q", 0, 10)
	if len(evs) != 2 || string(evs[1].Data) != `{"text":"taken"}` {
		t.Fatalf("journal: %+v", evs)
	}
}

// waitFor polls cond until it holds (no signal exists for "the writer took
// the queue"); it fails the test after 10 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDeleteAndClose(t *testing.T) {
	j, _ := open(t, Options{})
	id := "sess-del"
	mustAppend(t, j, id, delta("", "a"), event.New(event.TurnStarted, "t", event.TurnStartedData{TurnID: "t", ClientMessageID: "c"}))
	_, _, _, sub, err := j.Subscribe(id, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Delete(id); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(testCtx(t)); !errors.Is(err, ErrSubscriptionClosed) {
		t.Fatalf("subscription after delete: %v", err)
	}
	if st := j.State(id); st.LastSeq != 0 || len(j.Sessions()) != 0 {
		t.Fatalf("after delete: %+v %v", st, j.Sessions())
	}
	if _, ok, err := j.LookupClientMessage(id, "c"); ok || err != nil {
		t.Fatal("dedup index survived delete")
	}
	j.Close()
	if _, err := j.Append(context.Background(), id, delta("", "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}
