package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// Boundary tests: each limit takes exactly its value and refuses one
// past it, the error naming the limit.

func TestClientMessageIDLimit(t *testing.T) {
	j, _ := open(t, Options{})
	const id = "sess-cmid"
	at := strings.Repeat("m", MaxClientMessageIDBytes)
	if _, ok, err := j.LookupClientMessage(id, at); ok || err != nil {
		t.Fatalf("lookup at the limit: %v %v", ok, err)
	}
	start := func(cmid string) event.Draft {
		return event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "x", ClientMessageID: cmid})
	}
	if _, err := j.Append(context.Background(), id, start(at)); err != nil {
		t.Fatalf("append at the limit: %v", err)
	}
	if turn, ok, err := j.LookupClientMessage(id, at); turn != "t1" || !ok || err != nil {
		t.Fatalf("lookup at the limit after: %q %v %v", turn, ok, err)
	}
	over := at + "m"
	limit := fmt.Sprintf("is %d bytes, over the journal's limit of %d", MaxClientMessageIDBytes+1, MaxClientMessageIDBytes)
	if _, _, err := j.LookupClientMessage(id, over); !errors.Is(err, ErrBadDraft) || !strings.Contains(err.Error(), limit) {
		t.Fatalf("lookup one past the limit: %v", err)
	}
	if _, err := j.Append(context.Background(), id, start(over)); !errors.Is(err, ErrBadDraft) ||
		!strings.Contains(err.Error(), "clientMessageId") || !strings.Contains(err.Error(), limit) {
		t.Fatalf("append one past the limit: %v", err)
	}
}

func TestSessionIDLimit(t *testing.T) {
	j, _ := open(t, Options{})
	at := strings.Repeat("s", MaxSessionIDBytes)
	if _, err := j.Append(context.Background(), at, delta("", "x")); err != nil {
		t.Fatalf("append at the limit: %v", err)
	}
	limit := fmt.Sprintf("is %d bytes, over the journal's limit of %d", MaxSessionIDBytes+1, MaxSessionIDBytes)
	if _, err := j.Append(context.Background(), at+"s", delta("", "x")); !errors.Is(err, ErrBadDraft) || !strings.Contains(err.Error(), limit) {
		t.Fatalf("append one past the limit: %v", err)
	}
}

// TestRetentionKeepsExactlyMaxEvents: MaxEvents rows are all kept; one
// more drops the oldest. A cursor just before the oldest kept reads; one
// earlier is compacted, naming the oldest.
func TestRetentionKeepsExactlyMaxEvents(t *testing.T) {
	j, _ := open(t, Options{MaxEvents: 4})
	const id = "sess-keep"
	for range 4 {
		mustAppend(t, j, id, delta("", "x"))
	}
	if st := j.State(id); st.OldestSeq != 1 || st.LastSeq != 4 {
		t.Fatalf("at MaxEvents: %+v", st)
	}
	if evs, _, _, err := j.Read(id, 0, 10); err != nil || len(evs) != 4 {
		t.Fatalf("read at MaxEvents: %v %v", seqs(evs), err)
	}
	mustAppend(t, j, id, delta("", "x"))
	if st := j.State(id); st.OldestSeq != 2 || st.LastSeq != 5 {
		t.Fatalf("one past MaxEvents: %+v", st)
	}
	if evs, _, _, err := j.Read(id, 1, 10); err != nil || len(evs) != 4 || evs[0].Seq != 2 {
		t.Fatalf("read after oldest-1: %v %v", seqs(evs), err)
	}
	_, _, _, err := j.Read(id, 0, 10)
	var ce *CursorError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCursorCompacted) || ce.OldestSeq != 2 ||
		err.Error() != "session sess-keep: events after 0 compacted; oldest is 2" {
		t.Fatalf("read after 0: %v", err)
	}
	_, _, _, err = j.Read(id, 6, 10)
	if !errors.Is(err, ErrCursorAhead) || err.Error() != "session sess-keep: cursor 6 ahead of the journal's end 5" {
		t.Fatalf("read after 6: %v", err)
	}
}

// TestReadRangeSeesRetentionSinceCheck: a range read whose start was
// dropped after the cursor was checked (retention ran in between) is
// compacted, also when it finds no row at all.
func TestReadRangeSeesRetentionSinceCheck(t *testing.T) {
	j, _ := open(t, Options{MaxEvents: 3})
	const id = "sess-race"
	for range 6 {
		mustAppend(t, j, id, delta("", "x"))
	}
	for _, tc := range []struct{ upto uint64 }{{6}, {2}} {
		for _, limit := range []int{1, 10} {
			evs, _, err := j.readRange(id, 0, tc.upto, limit)
			var ce *CursorError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCursorCompacted) || ce.OldestSeq != 4 {
				t.Fatalf("readRange(0, %d, %d): %v %v", tc.upto, limit, seqs(evs), err)
			}
		}
	}
}

// TestPageBytesExactly: a page takes rows up to exactly PageBytes stored
// bytes; one byte less and the last of them waits for the next page.
func TestPageBytesExactly(t *testing.T) {
	const id = "sess-page"
	ds := []event.Draft{delta("", "a"), delta("", "b"), delta("", "c"), delta("", "d")}
	j0, _ := open(t, Options{})
	mustAppend(t, j0, id, ds...)
	evs, _, _, _ := j0.Read(id, 0, 10)
	three := len(evs[0].Raw) + len(evs[1].Raw) + len(evs[2].Raw)
	for _, tc := range []struct{ page, want int }{{three, 3}, {three - 1, 2}} {
		j, _ := open(t, Options{PageBytes: tc.page})
		mustAppend(t, j, id, ds...)
		evs, _, more, err := j.Read(id, 0, 10)
		if err != nil || len(evs) != tc.want || !more {
			t.Fatalf("PageBytes %d: %v more=%v %v, want %d events", tc.page, seqs(evs), more, err, tc.want)
		}
	}
}

// TestReadLimitBounds: limit 0 is the default, a limit past MaxReadLimit
// is MaxReadLimit, and exactly the remaining count says no more.
func TestReadLimitBounds(t *testing.T) {
	j, _ := open(t, Options{})
	const id = "sess-limit"
	ds := make([]event.Draft, MaxReadLimit+1)
	for i := range ds {
		ds[i] = delta("", "x")
	}
	mustAppend(t, j, id, ds...)
	for _, tc := range []struct {
		limit, want int
		more        bool
	}{{0, DefaultReadLimit, true}, {MaxReadLimit + 1, MaxReadLimit, true}, {MaxReadLimit, MaxReadLimit, true}} {
		evs, _, more, err := j.Read(id, 0, tc.limit)
		if err != nil || len(evs) != tc.want || more != tc.more {
			t.Fatalf("limit %d: %d events more=%v %v", tc.limit, len(evs), more, err)
		}
	}
	if evs, _, more, err := j.Read(id, 1, MaxReadLimit); err != nil || len(evs) != MaxReadLimit || more {
		t.Fatalf("the last %d: %d events more=%v %v", MaxReadLimit, len(evs), more, err)
	}
}

// TestSubscriberQueueBytesExactly: a queue takes events up to exactly
// QueueBytes; the first event always goes, however big.
func TestSubscriberQueueBytesExactly(t *testing.T) {
	const id = "sess-qb"
	j0, _ := open(t, Options{})
	mustAppend(t, j0, id, delta("", strings.Repeat("q", 100)))
	evs, _, _, _ := j0.Read(id, 0, 1)
	size := eventSize(&evs[0]) // seqs 1..9: every event the same size
	for _, tc := range []struct {
		bytes, before int
	}{{2 * size, 2}, {2*size - 1, 1}, {size / 2, 1}} {
		j, _ := open(t, Options{QueueBytes: tc.bytes})
		_, _, _, sub, err := j.Subscribe(id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			mustAppend(t, j, id, delta("", strings.Repeat("q", 100)))
		}
		for i := range tc.before {
			if got, err := sub.Next(testCtx(t)); err != nil || got.Seq != uint64(i+1) || eventSize(&got) != size {
				t.Fatalf("QueueBytes %d: event %d: %d (%d bytes) %v", tc.bytes, i, got.Seq, eventSize(&got), err)
			}
		}
		if _, err := sub.Next(testCtx(t)); !errors.Is(err, ErrLagged) {
			t.Fatalf("QueueBytes %d: %v, want ErrLagged", tc.bytes, err)
		}
		sub.Close()
	}
}

// TestSubscriberQueueDrained: a subscriber that keeps up never lags, the
// queue counting only what it has not taken.
func TestSubscriberQueueDrained(t *testing.T) {
	j, _ := open(t, Options{QueueEvents: 2})
	const id = "sess-qd"
	_, _, _, sub, err := j.Subscribe(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// Half taken: the queue holds one, room for one more.
	mustAppend(t, j, id, delta("", "a"), delta("", "b"))
	if ev, err := sub.Next(testCtx(t)); err != nil || ev.Seq != 1 {
		t.Fatalf("first: %d %v", ev.Seq, err)
	}
	mustAppend(t, j, id, delta("", "c"))
	for want := uint64(2); want <= 3; want++ {
		if ev, err := sub.Next(testCtx(t)); err != nil || ev.Seq != want {
			t.Fatalf("after half taken: %d %v, want %d", ev.Seq, err, want)
		}
	}
	seq := uint64(3)
	for i := range 8 {
		n := 1 + i%2
		for range n {
			mustAppend(t, j, id, delta("", "a"))
		}
		for range n {
			seq++
			if ev, err := sub.Next(testCtx(t)); err != nil || ev.Seq != seq {
				t.Fatalf("round %d: %d %v, want %d", i, ev.Seq, err, seq)
			}
		}
	}
}

// TestSinkFlushesAtExactlyCoalesceBytes: coalesced text reaching exactly
// CoalesceBytes is written at once (no window to wait out), as is a
// single delta of exactly that size.
func TestSinkFlushesAtExactlyCoalesceBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
	}{{"coalesced", []string{"ab", "cd"}}, {"single", []string{"abcd"}}} {
		t.Run(tc.name, func(t *testing.T) {
			j, _ := open(t, Options{CoalesceWindow: time.Hour, CoalesceBytes: 4})
			const id = "sess-cb"
			_, _, _, sub, err := j.Subscribe(id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			s := j.Sink(id)
			for _, text := range tc.in {
				s.Append(delta("t1", text))
			}
			ev, err := sub.Next(testCtx(t))
			if err != nil || texts([]event.Event{ev})[0] != "abcd" {
				t.Fatalf("%s %v", ev.Data, err)
			}
		})
	}
}

func TestLossCauseBound(t *testing.T) {
	at := strings.Repeat("c", 512)
	if got := lossCause(errors.New(at)); got != at {
		t.Fatalf("512 bytes: cut to %d", len(got))
	}
	if got := lossCause(errors.New(at + "d")); got != at+"…" {
		t.Fatalf("513 bytes: %q", got)
	}
}

// TestSinkLossKeepsFirstCause: losses noted before the next append are
// journaled ahead of it in one journal.loss row: their sum, the first
// cause.
func TestSinkLossKeepsFirstCause(t *testing.T) {
	j, _ := open(t, Options{})
	const id = "sess-loss"
	s := j.Sink(id)
	s.noteLoss(1, "first")
	s.noteLoss(2, "second")
	s.Append(event.New(event.ProviderNotice, "", event.NoticeData{Level: "info", Message: "m"}))
	if err := s.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, _, _, _ := j.Read(id, 0, 10)
	var loss event.JournalLossData
	if len(evs) != 2 || evs[0].Type != event.JournalLoss || json.Unmarshal(evs[0].Data, &loss) != nil ||
		loss.Count != 3 || loss.Cause != "first" || evs[1].Type != event.ProviderNotice {
		t.Fatalf("rows: %v", evs)
	}
	if st := j.State(id); st.Lost != 3 {
		t.Fatalf("state: %+v", st)
	}
}

// TestStatsListsOnlyLosingSessions and Sessions only journals with rows.
func TestStatsAndSessionsListOnlyWhatIs(t *testing.T) {
	j, _ := open(t, Options{})
	mustAppend(t, j, "sess-a", delta("", "x"))
	_, _, _, sub, err := j.Subscribe("sess-empty", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if st := j.Stats(); len(st.LostBySession) != 0 {
		t.Fatalf("lost by session: %v", st.LostBySession)
	}
	if got := j.Sessions(); len(got) != 1 || got[0] != "sess-a" {
		t.Fatalf("sessions: %v", got)
	}
}

// TestTurnStartedTurnFromData: a turn.started without a turnId opens the
// turn its data names.
func TestTurnStartedTurnFromData(t *testing.T) {
	j, _ := open(t, Options{})
	mustAppend(t, j, "sess-td", event.New(event.TurnStarted, "", event.TurnStartedData{TurnID: "t7", Text: "x"}))
	if st := j.State("sess-td"); st.OpenTurn != "t7" || st.OpenTurnSeq != 1 {
		t.Fatalf("state: %+v", st)
	}
}

// TestReopenTrustsNothingUnread: after a reopen, rows in the file are
// validated until a read has seen them valid; a damaged row reads as
// journal.corrupt whatever was read before, a clean reopen rebuilds
// nothing, and a full read marks the rows verified. Damaged lists it.
func TestReopenTrustsNothingUnread(t *testing.T) {
	dir := t.TempDir()
	const id = "sess-reopen"
	st := openStore(t, dir)
	j, err := Open(st.DB, Options{Now: func() time.Time { return fixedNow }, MaxEvents: 4})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		mustAppend(t, j, id, delta("", "x"))
	}
	j.Close()
	// Rows 3 and 4 (the oldest kept) get data that is not JSON, in the shape
	// the fast path takes.
	bad := []byte(`{"sessionId":"sess-reopen","seq":3,"at":"2026-03-04T05:06:07Z","type":"message.delta","data":{"text":}}`)
	if err := st.DB.Update(func(tx *bolt.Tx) error {
		evb := sessionBucket(tx, id).Bucket(keyEvents)
		if err := evb.Put(store.U64(3), bad); err != nil {
			return err
		}
		return evb.Put(store.U64(4), []byte(strings.Replace(string(bad), `"seq":3`, `"seq":4`, 1)))
	}); err != nil {
		t.Fatal(err)
	}
	var dmg map[string][]uint64
	if err := st.DB.View(func(tx *bolt.Tx) error { dmg = Damaged(tx); return nil }); err != nil || fmt.Sprint(dmg[id]) != "[3 4]" {
		t.Fatalf("damaged: %v %v", dmg, err)
	}
	var logs syncBuf
	j, err = Open(st.DB, Options{Now: func() time.Time { return fixedNow }, MaxEvents: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close(); st.Close() }()
	if strings.Contains(logs.String(), "rebuilding") {
		t.Fatalf("clean reopen rebuilt: %s", logs.String())
	}
	if evs, _, _, err := j.Read(id, 4, 10); err != nil || len(evs) != 2 {
		t.Fatalf("read after 4: %v %v", seqs(evs), err)
	}
	evs, _, _, err := j.Read(id, 2, 10)
	if err != nil || len(evs) != 4 || evs[0].Type != event.JournalCorrupt || evs[1].Type != event.JournalCorrupt || evs[2].Type != event.MessageDelta {
		t.Fatalf("read after 2: %v %v", evs, err)
	}
	if s := j.sessions[id]; s.verified != 2 {
		t.Fatalf("verified %d after a read with damage, want 2", s.verified)
	}
	if evs, _, _, err := j.Read(id, 4, 10); err != nil || len(evs) != 2 || j.sessions[id].verified != 2 {
		t.Fatalf("read after 4 again: %v %v verified %d", seqs(evs), err, j.sessions[id].verified)
	}
}

// TestReadMarksRowsVerified: a read from the oldest row that finds every
// row valid marks them verified (later reads skip validation).
func TestReadMarksRowsVerified(t *testing.T) {
	dir := t.TempDir()
	const id = "sess-verify"
	st := openStore(t, dir)
	opts := Options{Now: func() time.Time { return fixedNow }}
	j, err := Open(st.DB, opts)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		mustAppend(t, j, id, delta("", "x"))
	}
	j.Close()
	j, err = Open(st.DB, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close(); st.Close() }()
	if s := j.sessions[id]; s.verified != 0 || s.loaded != 3 {
		t.Fatalf("after open: loaded %d verified %d", s.loaded, s.verified)
	}
	if _, _, _, err := j.Read(id, 0, 2); err != nil || j.sessions[id].verified != 2 {
		t.Fatalf("after reading 2: verified %d %v", j.sessions[id].verified, err)
	}
	if _, _, _, err := j.Read(id, 2, 10); err != nil || j.sessions[id].verified != 3 {
		t.Fatalf("after reading the rest: verified %d %v", j.sessions[id].verified, err)
	}
}

// TestBackoffArithmetic: each retry waits twice the last, from
// heldRetryMin up to exactly heldRetryMax; once nothing is held the next
// wait is heldRetryMin again and no retry is armed.
func TestBackoffArithmetic(t *testing.T) {
	b := newBackoff()
	defer b.t.Stop()
	want := heldRetryMin
	for range 12 {
		if b.next != want {
			t.Fatalf("next %v, want %v", b.next, want)
		}
		b.arm(true)
		if !b.on {
			t.Fatal("not armed")
		}
		b.arm(true) // armed already: no change
		want = min(2*want, heldRetryMax)
		b.done()
	}
	if b.next != heldRetryMax || heldRetryMin != 20*time.Millisecond {
		t.Fatalf("next %v after 12 retries, min %v", b.next, heldRetryMin)
	}
	b.arm(true)
	b.arm(false)
	if b.on || b.next != heldRetryMin {
		t.Fatalf("after release: on %v next %v", b.on, b.next)
	}
	var j Journal
	j.rearm(b)
	if b.on {
		t.Fatal("rearm with nothing held armed a retry")
	}
}

// TestHeldBytesBound: held rows up to exactly HeldBytes stay held; one
// byte past, they are dropped as a loss. A request holds its drafts'
// type, turn and data bytes and a fixed overhead.
func TestHeldBytesBound(t *testing.T) {
	r := &request{drafts: []event.Draft{{Type: "ab", TurnID: "c", Data: json.RawMessage(`{}`)}, {Type: "d"}}}
	if got := r.size(); got != 64+2+1+2+1 {
		t.Fatalf("size %d", got)
	}
	var logs syncBuf
	j, _ := open(t, Options{HeldBytes: 100, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	j.heldBytes = 100
	j.boundHeld(store.ErrUnavailable)
	if j.heldBytes != 100 || strings.Contains(logs.String(), "dropped") {
		t.Fatalf("at the bound: held %d, %s", j.heldBytes, logs.String())
	}
	j.heldBytes = 101
	j.boundHeld(store.ErrUnavailable)
	if j.heldBytes != 0 || !strings.Contains(logs.String(), "limit=100") {
		t.Fatalf("past the bound: held %d, %s", j.heldBytes, logs.String())
	}
}

// TestOpenRebuildsMetaAheadOfRows: meta whose oldest seq is past the
// first row kept is rebuilt from the rows (logged once).
func TestOpenRebuildsMetaAheadOfRows(t *testing.T) {
	dir := t.TempDir()
	const id = "sess-meta"
	st := openStore(t, dir)
	opts := Options{Now: func() time.Time { return fixedNow }}
	j, err := Open(st.DB, opts)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, j, id, delta("", "a"), delta("", "b"), delta("", "c"))
	j.Close()
	if err := st.DB.Update(func(tx *bolt.Tx) error {
		return sessionBucket(tx, id).Bucket(keyMeta).Put(keyOldestSeq, store.U64(2))
	}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	j, err = Open(st.DB, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close(); st.Close() }()
	if s := j.State(id); s.OldestSeq != 1 || s.LastSeq != 3 || strings.Count(logs.String(), "rebuilding") != 1 {
		t.Fatalf("state %+v, log %s", s, logs.String())
	}
}

// TestPrefixBound: messages about bad input quote at most 32 bytes.
func TestPrefixBound(t *testing.T) {
	at := strings.Repeat("p", 32)
	if got := prefix(at); got != at {
		t.Fatalf("32 bytes: %q", got)
	}
	if got := prefix(at + "q"); got != at+"…" {
		t.Fatalf("33 bytes: %q", got)
	}
}

// TestDeleteUnknownSession: deleting a session that has no journal is
// not an error.
func TestDeleteUnknownSession(t *testing.T) {
	j, _ := open(t, Options{})
	if err := j.Delete("sess-never"); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// TestLossDropsLaterRowsOfItsTurn: a loss that failed the open turn
// drops the turn's later rows, counted in Stats.Dropped.
func TestLossDropsLaterRowsOfItsTurn(t *testing.T) {
	j, _ := open(t, Options{CoalesceWindow: -1})
	const id = "sess-lost-turn"
	s := j.Sink(id)
	if _, err := s.Commit(context.Background(), event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "x"})); err != nil {
		t.Fatal(err)
	}
	s.noteLoss(1, "gone")
	s.Append(delta("t1", "late"))
	s.Append(delta("t1", "later"))
	if err := s.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, _, _, _ := j.Read(id, 0, 10)
	if len(evs) != 3 || evs[1].Type != event.JournalLoss || evs[2].Type != event.TurnCompleted {
		t.Fatalf("rows: %v", evs)
	}
	if st := j.Stats(); st.Dropped != 2 {
		t.Fatalf("dropped %d, want 2", st.Dropped)
	}
}

// TestStatsCountCommits: appends waited for one by one are one
// transaction each; Appends counts their events.
func TestStatsCountCommits(t *testing.T) {
	j, _ := open(t, Options{})
	for range 3 {
		mustAppend(t, j, "sess-commits", delta("", "a"), delta("", "b"))
	}
	if st := j.Stats(); st.Commits != 3 || st.Appends != 6 {
		t.Fatalf("stats: %+v", st)
	}
}
