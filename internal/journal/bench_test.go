package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// benchParallelism × GOMAXPROCS goroutines append concurrently, each to its
// own session, in both the journal benchmark and the bbolt baseline.
const benchParallelism = 32

// benchDraft is a small event that a sink does not coalesce.
var benchDraft = event.New(event.MessageCompleted, "t_bench", event.DeltaData{Text: "a small message of text"})

// BenchmarkJournalAppend: many small events through the group-commit
// writer, fsync on, from many goroutines across sessions, the way live
// sessions write: each goroutine owns a session's sink, hands events in with
// Sink.Append and every 32nd with Sink.Commit (a write-ahead row: waits until
// durable), and drains at the end, so every event is durable within the
// timed run. ns/op is per event.
func BenchmarkJournalAppend(b *testing.B) {
	j, _ := open(b, Options{})
	var n atomic.Int64
	ctx := context.Background()
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s := j.Sink(fmt.Sprintf("sess-bench-%04d", n.Add(1)))
		for i := 1; pb.Next(); i++ {
			if i%32 != 0 {
				s.Append(benchDraft)
				continue
			}
			if _, err := s.Commit(ctx, benchDraft); err != nil {
				b.Error(err)
				return
			}
		}
		if err := s.Drain(ctx); err != nil {
			b.Error(err)
		}
	})
	reportAppend(b, j)
}

// BenchmarkJournalAppendSync: one event per Journal.Append, each caller
// waiting until its event is durable. Throughput is bounded by
// goroutines / commit latency: the batch can hold at most one event per
// waiting caller.
func BenchmarkJournalAppendSync(b *testing.B) {
	j, _ := open(b, Options{})
	var n atomic.Int64
	ctx := context.Background()
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("sess-bench-%04d", n.Add(1))
		for pb.Next() {
			if _, err := j.Append(ctx, id, benchDraft); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportAppend(b, j)
}

func reportAppend(b *testing.B, j *Journal) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	st := j.Stats()
	b.ReportMetric(float64(st.Appends)/float64(max(st.Commits, 1)), "events/commit")
}

// BenchmarkBoltBatchBaseline writes the same events with plain
// bbolt.DB.Batch from the same number of goroutines, same durability.
func BenchmarkBoltBatchBaseline(b *testing.B) {
	st := openStore(b, b.TempDir())
	b.Cleanup(func() { st.Close() })
	var n atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := []byte(fmt.Sprintf("sess-base-%04d", n.Add(1)))
		var seq uint64
		for pb.Next() {
			seq++
			ev := event.Event{SessionID: string(id), Seq: seq, At: fixedNow, Type: benchDraft.Type,
				TurnID: benchDraft.TurnID, Data: benchDraft.Data}
			v := event.AppendJSON(nil, &ev)
			key := store.U64(seq)
			err := st.DB.Batch(func(tx *bolt.Tx) error { // idempotent: Batch may rerun it
				sb, err := tx.Bucket(store.BucketJournal).CreateBucketIfNotExists(id)
				if err != nil {
					return err
				}
				evb, err := sb.CreateBucketIfNotExists(keyEvents)
				if err != nil {
					return err
				}
				return evb.Put(key, v)
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkJournalRead reads pages of 256 from a 100k-event journal; ns/op
// is per page.
func BenchmarkJournalRead(b *testing.B) {
	const total, page = 100000, 256
	j, _ := open(b, Options{})
	const id = "sess-read"
	batch := make([]event.Draft, 1000)
	for i := range batch {
		batch[i] = delta("t_bench", fmt.Sprintf("delta number %d of the turn", i))
	}
	for range total / len(batch) {
		if _, err := j.Append(context.Background(), id, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var after uint64
	for range b.N {
		evs, _, _, err := j.Read(id, after, page)
		if err != nil || len(evs) == 0 {
			b.Fatalf("read after %d: %d events, %v", after, len(evs), err)
		}
		after = evs[len(evs)-1].Seq
		if after >= total {
			after = 0
		}
	}
	b.ReportMetric(float64(b.N*page)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReadEncode is the daemon's side of an attach replay: read pages
// of 4096 from a 100k-event journal and encode them as a reply's events
// array; ns/op is per page.
func BenchmarkReadEncode(b *testing.B) {
	const total, page = 100000, 4096
	j, _ := open(b, Options{})
	const id = "sess-replay"
	batch := make([]event.Draft, 1000)
	for i := range batch {
		batch[i] = delta("t_bench", fmt.Sprintf("delta number %d of the turn", i))
	}
	for range total / len(batch) {
		if _, err := j.Append(context.Background(), id, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var after uint64
	var buf []byte
	for range b.N {
		evs, _, _, err := j.Read(id, after, page)
		if err != nil || len(evs) == 0 {
			b.Fatalf("read after %d: %d events, %v", after, len(evs), err)
		}
		buf = event.AppendEvents(buf[:0], evs)
		after = evs[len(evs)-1].Seq
		if after >= total {
			after = 0
		}
	}
	b.ReportMetric(float64(b.N*page)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRowEvent: one stored row as a read hands it out (arena copy and
// field decode), for a trusted row of the replay's shape; ns/op is per row.
func BenchmarkRowEvent(b *testing.B) {
	ev := event.Event{SessionID: "bench_00000000", Seq: 12345, At: time.Date(2026, 11, 30, 17, 16, 11, 123456789, time.UTC),
		Type: event.MessageDelta, TurnID: "t_bench", Data: json.RawMessage(`{"text":"` + strings.Repeat("x", 64) + `"}`)}
	row := event.AppendJSON(nil, &ev)
	rr := rowReader{loaded: 0}
	b.ReportAllocs()
	b.SetBytes(int64(len(row)))
	for b.Loop() {
		got, err := rr.event(ev.SessionID, ev.Seq, row)
		if err != nil || got.Raw == nil || got.Type != event.MessageDelta {
			b.Fatalf("%+v %v", got, err)
		}
	}
}
