package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// batcher holds the writer on a first batch so that everything handed in
// meanwhile reaches it as one batch. took receives every batch taken.
type batcher struct {
	took chan []*request
	tx   *bolt.Tx
}

func holdWriter(t *testing.T, j *Journal, db *bolt.DB) *batcher {
	t.Helper()
	b := &batcher{took: make(chan []*request, 64)}
	j.onTake = func(batch []*request) { b.took <- batch }
	tx, err := db.Begin(true) // the writer's next Update waits for it
	if err != nil {
		t.Fatal(err)
	}
	b.tx = tx
	first := &request{id: "sess-first", drafts: []event.Draft{event.New(event.SessionCreated, "", nil)}, done: make(chan struct{})}
	if err := j.enqueue(first); err != nil {
		t.Fatal(err)
	}
	<-b.took // taken; the writer now waits for the bolt lock
	return b
}

// release lets the writer go and returns the next batch it takes.
func (b *batcher) release(t *testing.T) []*request {
	t.Helper()
	if err := b.tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	return <-b.took
}

// poisoned is a request the store refuses: a dedup key over bbolt's
// 32 KiB key limit, handed past the journal's own checks.
func poisoned(id string, s *Sink) *request {
	cmid := strings.Repeat("k", bolt.MaxKeySize+1)
	d := event.New(event.TurnStarted, "t_bad", event.TurnStartedData{TurnID: "t_bad", Text: "x", ClientMessageID: cmid})
	return &request{id: id, drafts: []event.Draft{d}, done: make(chan struct{}), sink: s}
}

func deltaConcat(evs []event.Event, turn string) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == event.MessageDelta && e.TurnID == turn {
			var d event.DeltaData
			_ = json.Unmarshal(e.Data, &d)
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func types(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// TestPoisonedRequestFailsAlone: a request the store refuses, batched with
// an innocent session's streaming appends, fails alone; the innocent
// session keeps every delta, gapless, and its turn completes.
func TestPoisonedRequestFailsAlone(t *testing.T) {
	j, st := open(t, Options{CoalesceWindow: -1})
	b := holdWriter(t, j, st.DB)

	in := j.Sink("sess-innocent")
	in.Append(event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "go"}))
	var text strings.Builder
	bad := poisoned("sess-attacker", nil)
	for i := range 40 {
		s := fmt.Sprintf("chunk %d; ", i)
		text.WriteString(s)
		in.Append(delta("t1", s))
		if i == 20 {
			if err := j.enqueue(bad); err != nil {
				t.Fatal(err)
			}
		}
	}
	in.Append(event.New(event.MessageCompleted, "t1", event.DeltaData{Text: text.String()}))
	in.Append(event.New(event.TurnCompleted, "t1", event.TurnCompletedData{Status: event.StatusCompleted}))
	batch := b.release(t)
	if len(batch) != 44 || !slices.Contains(batch, bad) {
		t.Fatalf("batch of %d requests, want all 44 in one", len(batch))
	}
	if err := in.Drain(context.Background()); err != nil {
		t.Fatalf("innocent drain: %v", err)
	}
	<-bad.done
	if !errors.Is(bad.err, berrors.ErrKeyTooLarge) {
		t.Fatalf("poisoned request: err = %v, want ErrKeyTooLarge", bad.err)
	}
	evs, last, _, err := j.Read("sess-innocent", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs(evs), seqRange(1, last)) || last != 43 {
		t.Fatalf("innocent seqs %v (last %d), want 1..43", seqs(evs), last)
	}
	if got := deltaConcat(evs, "t1"); got != text.String() {
		t.Fatalf("innocent deltas %q, want %q", got, text.String())
	}
	if evs[len(evs)-1].Type != event.TurnCompleted || j.State("sess-innocent").OpenTurn != "" {
		t.Fatalf("innocent turn not completed: %v", types(evs[len(evs)-3:]))
	}
	if got, _, _, _ := j.Read("sess-attacker", 0, 10); len(got) != 0 {
		t.Fatalf("attacker journal: %v", types(got))
	}
}

// TestSinkLossIsJournaled: a session whose own asynchronous append cannot
// be stored gets a journal.loss row in its place, its open turn completed
// failed, nothing more of that turn, and goes on with the next turn.
func TestSinkLossIsJournaled(t *testing.T) {
	j, st := open(t, Options{CoalesceWindow: -1})
	ctx := context.Background()
	const id = "sess-victim"
	s := j.Sink(id)
	if _, err := s.Commit(ctx, event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "go"})); err != nil {
		t.Fatal(err)
	}
	b := holdWriter(t, j, st.DB)
	s.Append(delta("t1", "before "))
	s.mu.Lock()
	s.handLocked(poisoned(id, s))
	s.mu.Unlock()
	s.Append(delta("t1", "after"))
	s.Append(event.New(event.TurnCompleted, "t1", event.TurnCompletedData{Status: event.StatusCompleted}))
	b.release(t)
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	evs, last, _, _ := j.Read(id, 0, 100)
	want := []string{event.TurnStarted, event.MessageDelta, event.JournalLoss, event.TurnCompleted}
	if !slices.Equal(types(evs), want) || !slices.Equal(seqs(evs), seqRange(1, last)) {
		t.Fatalf("journal %v %v, want %v gapless", types(evs), seqs(evs), want)
	}
	var loss event.JournalLossData
	_ = json.Unmarshal(evs[2].Data, &loss)
	var done event.TurnCompletedData
	_ = json.Unmarshal(evs[3].Data, &done)
	if loss.Count != 1 || !strings.Contains(loss.Cause, "key too large") || evs[2].TurnID != "t1" ||
		done.Status != event.StatusFailed || done.Reason != event.ReasonJournalLoss || evs[3].TurnID != "t1" {
		t.Fatalf("loss %s / %s", evs[2].Data, evs[3].Data)
	}
	if st := j.State(id); st.OpenTurn != "" || st.Lost != 1 {
		t.Fatalf("state %+v", st)
	}
	if st := j.Stats(); st.LostBySession[id] != 1 || st.Isolated != 1 || st.Lost != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The session goes on.
	if _, err := s.Commit(ctx, event.New(event.TurnStarted, "t2", event.TurnStartedData{TurnID: "t2", Text: "again"}), delta("t2", "ok")); err != nil {
		t.Fatal(err)
	}
	if st := j.State(id); st.OpenTurn != "t2" {
		t.Fatalf("state %+v", st)
	}
	j.db.View(func(tx *bolt.Tx) error {
		if got := Losses(tx); got[id] != 1 || len(got) != 1 {
			t.Fatalf("Losses = %v", got)
		}
		return nil
	})
}

// TestSinkLossNotJournaledIsReported: when the store refuses everything,
// Drain says so (the store's failure) instead of reporting success; Close
// drops what is still held as a loss.
func TestSinkLossNotJournaledIsReported(t *testing.T) {
	j, st := open(t, Options{CoalesceWindow: -1})
	s := j.Sink("sess-broken")
	if err := st.DB.Close(); err != nil {
		t.Fatal(err)
	}
	s.Append(delta("t1", "x"))
	err := s.Drain(context.Background())
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "database not open") {
		t.Fatalf("drain: %v", err)
	}
	j.Close()
	if err := s.Drain(context.Background()); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "1 events lost") {
		t.Fatalf("drain after close: %v", err)
	}
}

// TestClientMessageIDBound: the journal itself refuses a dedup key over
// its limit, naming the limit and echoing only a prefix.
func TestClientMessageIDBound(t *testing.T) {
	j, _ := open(t, Options{})
	ctx := context.Background()
	start := func(cmid string) event.Draft {
		return event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "x", ClientMessageID: cmid})
	}
	long := strings.Repeat("c", MaxClientMessageIDBytes+1)
	_, err := j.Append(ctx, "sess-cmid", start(long))
	if !errors.Is(err, ErrBadDraft) || !strings.Contains(err.Error(), "1024") || strings.Contains(err.Error(), long[:100]) {
		t.Fatalf("append: %v", err)
	}
	if _, err := j.Sink("sess-cmid").Commit(ctx, start(long)); !errors.Is(err, ErrBadDraft) {
		t.Fatalf("commit: %v", err)
	}
	ok := strings.Repeat("c", MaxClientMessageIDBytes)
	if _, err := j.Append(ctx, "sess-cmid", start(ok)); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, strings.Repeat("s", MaxSessionIDBytes+1), delta("t", "x")); !errors.Is(err, ErrBadDraft) {
		t.Fatalf("long session id: %v", err)
	}
}
