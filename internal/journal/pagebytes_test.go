package journal

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestPagesCappedByBytes: a page of big events stops at the byte cap with
// hasMore, always holds at least one event (even one bigger than the cap),
// and paging reaches the end with no gap and no duplicate; the attach
// snapshot is capped the same way.
func TestPagesCappedByBytes(t *testing.T) {
	const capBytes = 10000
	j, _ := open(t, Options{PageBytes: capBytes})
	ctx := context.Background()
	const id = "sess-bytes"
	for i := range 40 {
		text := strings.Repeat("x", 3000)
		if i == 17 {
			text = strings.Repeat("y", 3*capBytes) // one event over the cap
		}
		if _, err := j.Append(ctx, id, delta("t1", text)); err != nil {
			t.Fatal(err)
		}
	}
	var got []uint64
	after := uint64(0)
	for pages := 0; ; pages++ {
		evs, last, more, err := j.Read(id, after, MaxReadLimit)
		if err != nil || len(evs) == 0 {
			t.Fatalf("page after %d: %d events, %v", after, len(evs), err)
		}
		size := 0
		for i := range evs {
			size += len(evs[i].Raw)
		}
		if size > capBytes && len(evs) > 1 {
			t.Fatalf("page after %d: %d events, %d bytes over the %d cap", after, len(evs), size, capBytes)
		}
		got = append(got, seqs(evs)...)
		after = evs[len(evs)-1].Seq
		if !more {
			if after != last {
				t.Fatalf("no more at %d, last %d", after, last)
			}
			break
		}
		if pages > 40 {
			t.Fatal("paging does not end")
		}
	}
	if !slices.Equal(got, seqRange(1, 40)) {
		t.Fatalf("paged %v", got)
	}
	snap, last, more, sub, err := j.Subscribe(id, 0, MaxReadLimit)
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	if len(snap) != 3 || !more || last != 40 {
		t.Fatalf("snapshot: %d events, more %v, last %d; want 3 under the cap", len(snap), more, last)
	}
}
