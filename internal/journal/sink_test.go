package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

func texts(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		if e.Type == event.MessageDelta {
			var d event.DeltaData
			_ = json.Unmarshal(e.Data, &d)
			out[i] = d.Text
		} else {
			out[i] = e.Type
		}
	}
	return out
}

func TestSinkCoalescesDeltas(t *testing.T) {
	tests := []struct {
		name  string
		bytes int
		in    []event.Draft
		want  []string
	}{
		{"one turn", 0, []event.Draft{delta("t1", "he"), delta("t1", "ll"), delta("t1", "o")}, []string{"hello"}},
		{"turn change", 0, []event.Draft{delta("t1", "a"), delta("t2", "b"), delta("t2", "c")}, []string{"a", "bc"}},
		{"broken by another type", 0, []event.Draft{delta("t1", "a"), event.New(event.MessageCompleted, "t1", event.DeltaData{Text: "a"}), delta("t1", "b")},
			[]string{"a", event.MessageCompleted, "b"}},
		{"byte cap", 4, []event.Draft{delta("t1", "ab"), delta("t1", "cd"), delta("t1", "ef"), delta("t1", "ghijk"), delta("t1", "l")},
			[]string{"abcd", "ef", "ghijk", "l"}},
		{"not an object", 0, []event.Draft{delta("t1", "a"), {Type: event.MessageDelta, TurnID: "t1", Data: json.RawMessage(`"raw"`)}, delta("t1", "b")},
			[]string{"a", "", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, _ := open(t, Options{CoalesceWindow: time.Hour, CoalesceBytes: tc.bytes})
			s := j.Sink("sess-co")
			for _, d := range tc.in {
				s.Append(d)
			}
			if err := s.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			evs, _, _, _ := j.Read("sess-co", 0, 100)
			if got := texts(evs); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSinkCoalescedKeepsFirstFields(t *testing.T) {
	j, _ := open(t, Options{CoalesceWindow: time.Hour})
	s := j.Sink("sess-fields")
	s.Append(event.New(event.MessageDelta, "t1", event.DeltaData{Text: "a\"", ProviderTurnID: "p1"}))
	s.Append(event.New(event.MessageDelta, "t1", event.DeltaData{Text: "é", ProviderTurnID: "p2"}))
	evs, err := s.Commit(context.Background(), event.New(event.TurnCompleted, "t1", event.TurnCompletedData{Status: "completed"}))
	if err != nil || evs[0].Seq != 2 {
		t.Fatalf("commit: %v %v", evs, err)
	}
	got, _, _, _ := j.Read("sess-fields", 0, 10)
	var d event.DeltaData
	if err := json.Unmarshal(got[0].Data, &d); err != nil || d.Text != "a\"é" || d.ProviderTurnID != "p1" || got[0].TurnID != "t1" {
		t.Fatalf("coalesced: %s %v", got[0].Data, err)
	}
}

// TestSinkWindowFlushes: without Drain, a lone delta still reaches a
// subscriber once its window passes.
func TestSinkWindowFlushes(t *testing.T) {
	j, _ := open(t, Options{CoalesceWindow: time.Millisecond})
	_, _, _, sub, _ := j.Subscribe("sess-win", 0, 0)
	defer sub.Close()
	j.Sink("sess-win").Append(delta("t", "x"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ev, err := sub.Next(ctx); err != nil || ev.Seq != 1 {
		t.Fatalf("next: %v %v", ev, err)
	}
}

func TestSinkOrderAndDrain(t *testing.T) {
	j, _ := open(t, Options{CoalesceWindow: -1})
	s := j.Sink("sess-order")
	for i := range 300 {
		s.Append(event.New(event.MessageCompleted, "t", event.DeltaData{Text: fmt.Sprint(i)}))
	}
	evs, err := s.Commit(context.Background(), event.New(event.TurnCompleted, "t", event.TurnCompletedData{Status: "completed"}))
	if err != nil || evs[0].Seq != 301 {
		t.Fatalf("commit after 300 appends: %v %v", evs, err)
	}
	for i := range 50 {
		s.Append(event.New(event.MessageCompleted, "t", event.DeltaData{Text: fmt.Sprint(i)}))
	}
	if err := s.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := j.State("sess-order"); st.LastSeq != 351 {
		t.Fatalf("drain returned before everything was committed: %+v", st)
	}
	all, _, _, _ := j.Read("sess-order", 0, 400)
	for i, e := range all[:300] {
		var d event.DeltaData
		_ = json.Unmarshal(e.Data, &d)
		if d.Text != fmt.Sprint(i) {
			t.Fatalf("event %d out of order: %s", i, d.Text)
		}
	}
}

func TestSinkCloseThenDiscard(t *testing.T) {
	j, _ := open(t, Options{CoalesceWindow: time.Hour})
	const id = "sess-life"
	s := j.Sink(id)
	if j.Sink(id) != s {
		t.Fatal("Sink did not return the cached sink")
	}
	s.Append(delta("t", "buffered"))
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := j.State(id); st.LastSeq != 1 {
		t.Fatalf("close did not drain the buffered delta: %+v", st)
	}
	if _, err := s.Commit(context.Background(), delta("t", "late")); !errors.Is(err, ErrSinkClosed) {
		t.Fatalf("commit on a closed sink: %v", err)
	}
	s.Append(delta("t", "dropped"))
	if j.Sink(id) != s {
		t.Fatal("a closed but not discarded sink was replaced")
	}
	s.Discard()
	fresh := j.Sink(id)
	if fresh == s {
		t.Fatal("Discard kept the sink cached")
	}
	if evs, err := fresh.Commit(context.Background(), delta("t", "again")); err != nil || evs[0].Seq != 2 {
		t.Fatalf("fresh sink: %v %v", evs, err)
	}
	if st := j.Stats(); st.Dropped != 1 {
		t.Fatalf("stats: %+v", st)
	}
	// Discard without Close still hands the buffered delta in.
	fresh.Append(delta("t", "last"))
	fresh.Discard()
	if err := fresh.Drain(context.Background()); err != nil || j.State(id).LastSeq != 3 {
		t.Fatalf("discard lost the buffer: %v %+v", err, j.State(id))
	}
}

func TestJournalCloseFlushesSinks(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	defer st.Close()
	j, err := Open(st.DB, Options{CoalesceWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	j.Sink("sess-flush").Append(delta("t", "pending"))
	j.Close()
	j2, err := Open(st.DB, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if evs, _, _, _ := j2.Read("sess-flush", 0, 10); len(evs) != 1 {
		t.Fatalf("close lost the buffered delta: %v", evs)
	}
}

// TestSinkDrainAfterWithdrawnCommit: a Commit withdrawn by its ctx must not
// let Drain skip the appends queued before it.
func TestSinkDrainAfterWithdrawnCommit(t *testing.T) {
	j, st := open(t, Options{CoalesceWindow: -1})
	const id = "sess-withdrawn"
	s := j.Sink(id)
	tx, err := st.DB.Begin(true) // the writer blocks in its next commit
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	s.Append(delta("t", "a"))
	queued := func(n int) func() bool {
		return func() bool { j.qmu.Lock(); defer j.qmu.Unlock(); return len(j.queue) == n }
	}
	waitFor(t, queued(0)) // "a" taken: the writer waits on our tx
	s.Append(event.New(event.MessageCompleted, "t", event.DeltaData{Text: "x"}))
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { _, err := s.Commit(ctx, event.New(event.TurnCompleted, "t", nil)); res <- err }()
	waitFor(t, queued(2))
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("commit: %v", err)
	}
	// While our tx blocks the writer, "x" cannot be committed: Drain must
	// not report success.
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	if err := s.Drain(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain returned %v while an append was still queued", err)
	}
	_ = tx.Rollback()
	if err := s.Drain(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	evs, _, _, _ := j.Read(id, 0, 10)
	if got := texts(evs); !slices.Equal(got, []string{"a", event.MessageCompleted}) {
		t.Fatalf("journal: %q", got)
	}
}
