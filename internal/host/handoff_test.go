package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
)

// TestQuiesceCommitsEverythingParsed: with deltas held in the sink (a
// coalescing window far longer than the test), Quiesce returns only once
// every event the reader parsed before its pause is committed: what is
// only in memory would be lost by the exec. The echo provider cuts its
// flood's middle line (/split) and waits, so the reader's stopping point
// is known: every delta before the cut line.
func TestQuiesceCommitsEverythingParsed(t *testing.T) {
	f := newFixture(t, journal.Options{CoalesceWindow: time.Hour, CoalesceBytes: 1 << 30})
	id := f.create("echo")
	f.hold(id, "t", "c1")
	fifo := filepath.Join(t.TempDir(), "split")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const n, width = 40, 8
	if _, err := f.h.Send(context.Background(), api.SendParams{SessionID: id, Text: fmt.Sprintf("/flood %d %d /numbered /split %s", n, width, fifo)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // let the provider finish its line, whatever happened
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
	})
	var q *Quiesced
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		q, err = f.h.Quiesce(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Sessions) == 1 && len(q.Sessions[0].Adapter.Unparsed) > 0 {
			break // the reader stopped inside the cut line
		}
		q.Abandon()
		if time.Now().After(deadline) {
			t.Fatal("the reader never reached the cut line")
		}
		time.Sleep(5 * time.Millisecond) // another process's output: nothing to wait on
	}
	evs, _, _, err := f.j.Read(id, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, ev := range evs {
		if ev.Type == event.MessageDelta {
			text.WriteString(data(ev)["text"].(string))
		}
	}
	want := ""
	for i := range n / 2 {
		want += fmt.Sprintf("%0*d", width, i)
	}
	if text.String() != want {
		t.Fatalf("committed when Quiesce returned: %q; want every delta before the cut line %q", text.String(), want)
	}
	q.Abandon()
}
