package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// collect reads a subscription until seq `upto`, failing on any error.
func collect(t testing.TB, sub *Subscription, upto uint64) []uint64 {
	t.Helper()
	var out []uint64
	ctx := testCtx(t)
	for len(out) == 0 || out[len(out)-1] < upto {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Errorf("next after %v: %v", out, err)
			return out
		}
		out = append(out, ev.Seq)
	}
	return out
}

// TestSubscribeNoGapNoDuplicate subscribes again and again while several
// goroutines append; every subscriber's snapshot followed by its live feed
// must be exactly 1..N. (fsync off: more commits race each Subscribe.)
func TestSubscribeNoGapNoDuplicate(t *testing.T) {
	j, st := open(t, Options{})
	st.DB.NoSync = true
	const id, writers, each, subscribers = "sess-feed", 4, 300, 200
	total := uint64(writers * each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := j.Append(context.Background(), id, delta("", fmt.Sprintf("%d-%d", w, i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var subWG sync.WaitGroup
	for s := 0; s < subscribers && j.State(id).LastSeq < total; s++ {
		snap, last, more, sub, err := j.Subscribe(id, 0, MaxReadLimit)
		if err != nil {
			t.Fatal(err)
		}
		if more || uint64(len(snap)) != last || (len(snap) > 0 && snap[len(snap)-1].Seq != last) {
			t.Fatalf("subscriber %d: snapshot %d events, last %d, more %v", s, len(snap), last, more)
		}
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			defer sub.Close()
			got := seqs(snap)
			if last < total {
				got = append(got, collect(t, sub, total)...)
			}
			if !slices.Equal(got, seqRange(1, total)) {
				t.Errorf("subscriber %d (from %d): got %d events, gap or duplicate", s, last, len(got))
			}
		}()
	}
	wg.Wait()
	subWG.Wait()
}

// TestPublishedOnlyWhenDurable: whatever a subscriber receives is already
// in the file, seen from an independent read transaction.
func TestPublishedOnlyWhenDurable(t *testing.T) {
	j, st := open(t, Options{})
	const id = "sess-durable"
	_, _, _, sub, err := j.Subscribe(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if _, err := j.Append(context.Background(), id, delta("", fmt.Sprint(i))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for want := uint64(1); want <= 200; want++ {
		ev, err := sub.Next(testCtx(t))
		if err != nil || ev.Seq != want {
			t.Fatalf("next: %d %v, want %d", ev.Seq, err, want)
		}
		var found bool
		_ = st.DB.View(func(tx *bolt.Tx) error {
			found = sessionBucket(tx, id).Bucket(keyEvents).Get(store.U64(ev.Seq)) != nil
			return nil
		})
		if !found {
			t.Fatalf("seq %d published before it was committed", ev.Seq)
		}
	}
	<-done
}

func TestLaggedSubscriber(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		text   string
		before int // events delivered before ErrLagged
	}{
		{"event cap", Options{QueueEvents: 3}, "x", 3},
		{"byte cap", Options{QueueBytes: 700}, strings.Repeat("y", 200), 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, _ := open(t, tc.opts)
			const id = "sess-lag"
			_, _, _, slow, err := j.Subscribe(id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			_, _, _, fast, _ := j.Subscribe(id, 0, 0)
			defer fast.Close()
			for i := range 6 {
				mustAppend(t, j, id, delta("", tc.text))
				if ev, err := fast.Next(testCtx(t)); err != nil || ev.Seq != uint64(i+1) {
					t.Fatalf("fast subscriber: %d %v", ev.Seq, err)
				}
			}
			for i := range tc.before {
				if ev, err := slow.Next(testCtx(t)); err != nil || ev.Seq != uint64(i+1) {
					t.Fatalf("slow subscriber event %d: %d %v", i, ev.Seq, err)
				}
			}
			if _, err := slow.Next(testCtx(t)); !errors.Is(err, ErrLagged) {
				t.Fatalf("slow subscriber: %v, want ErrLagged", err)
			}
			if st := j.Stats(); st.Lagged != 1 || st.Subscribers != 1 {
				t.Fatalf("stats: %+v", st)
			}
		})
	}
}

func TestSubscribeSnapshotAndErrors(t *testing.T) {
	j, _ := open(t, Options{MaxEvents: 5})
	const id = "sess-snap"
	for i := range 8 {
		mustAppend(t, j, id, delta("", fmt.Sprint(i)))
	}
	snap, last, more, sub, err := j.Subscribe(id, 3, 2)
	if err != nil || last != 8 || !more || !slices.Equal(seqs(snap), []uint64{4, 5}) {
		t.Fatalf("subscribe: %v %d %v %v", seqs(snap), last, more, err)
	}
	mustAppend(t, j, id, delta("", "live"))
	if ev, err := sub.Next(testCtx(t)); err != nil || ev.Seq != 9 {
		t.Fatalf("live: %d %v", ev.Seq, err)
	}
	sub.Close()
	if _, err := sub.Next(testCtx(t)); !errors.Is(err, ErrSubscriptionClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, _, _, _, err := j.Subscribe(id, 10, 1); !errors.Is(err, ErrCursorAhead) {
		t.Fatalf("ahead: %v", err)
	}
	if _, _, _, _, err := j.Subscribe(id, 1, 1); !errors.Is(err, ErrCursorCompacted) {
		t.Fatalf("compacted: %v", err)
	}
	if st := j.Stats(); st.Subscribers != 0 {
		t.Fatalf("refused subscriptions registered: %+v", st)
	}
}

func TestSubscriptionEndsAtJournalClose(t *testing.T) {
	j, _ := open(t, Options{})
	_, _, _, sub, _ := j.Subscribe("sess-end", 0, 0)
	mustAppend(t, j, "sess-end", event.New(event.SessionCreated, "", nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	j.Close()
	if ev, err := sub.Next(ctx); err != nil || ev.Seq != 1 {
		t.Fatalf("queued event after close: %v %v", ev, err)
	}
	if _, err := sub.Next(testCtx(t)); !errors.Is(err, ErrSubscriptionClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, _, _, _, err := j.Subscribe("sess-end", 0, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscribe after close: %v", err)
	}
}

func TestNextHonoursContext(t *testing.T) {
	j, _ := open(t, Options{})
	_, _, _, sub, _ := j.Subscribe("sess-ctx", 0, 0)
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("next: %v", err)
	}
}

// testCtx bounds a wait in a test, so a broken feed fails instead of hanging.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
