package journal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/store"
)

// fullDisk is a store on a small tmpfs (root only) and a way to fill it
// and to free it again.
type fullDisk struct {
	dir  string
	fill string
}

func openOnTmpfs(t *testing.T, opts Options) (*Journal, *fullDisk) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, state)
	j, err := Open(st.DB, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close(); st.Close() })
	return j, &fullDisk{dir: dir, fill: filepath.Join(dir, "fill")}
}

func (d *fullDisk) fillUp(t *testing.T) {
	t.Helper()
	f, err := os.Create(d.fill)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

func (d *fullDisk) free(t *testing.T) {
	t.Helper()
	if err := os.Remove(d.fill); err != nil {
		t.Fatal(err)
	}
}

// big is a delta no page freed by earlier commits can hold: it needs the
// file to grow.
func big(turn string) event.Draft { return delta(turn, strings.Repeat("x", 512<<10)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestStoreFullHoldsSinkRowsUntilSpaceReturns: on a full disk a waiting
// caller's append fails at once with store.ErrUnavailable and changes
// nothing; a sink's rows (a turn's end) are held, not lost and not
// published, Drain says the store refuses instead of waiting; once space
// returns the held rows are committed in order and published, the turn
// is closed and the journal says it takes writes again.
func TestStoreFullHoldsSinkRowsUntilSpaceReturns(t *testing.T) {
	j, disk := openOnTmpfs(t, Options{CoalesceWindow: -1})
	ctx := ctxT(t)
	const id = "sess-full"
	s := j.Sink(id)
	if _, err := s.Commit(ctx, event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "x"})); err != nil {
		t.Fatal(err)
	}
	_, _, _, sub, err := j.Subscribe(id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	disk.fillUp(t)

	if _, err := j.Append(ctx, "sess-other", big("")); !errors.Is(err, store.ErrUnavailable) ||
		!strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("append on a full disk: %v, want store.ErrUnavailable", err)
	}
	if st := j.State("sess-other"); st.LastSeq != 0 {
		t.Fatalf("the refused append changed the journal: %+v", st)
	}
	s.Append(big("t1"))
	s.Append(event.New(event.TurnCompleted, "t1", event.TurnCompletedData{Status: event.StatusCompleted}))
	if err := s.Drain(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("drain on a full disk: %v, want store.ErrUnavailable", err)
	}
	if _, err := s.Commit(ctx, delta("t1", "sync")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("commit on a full disk: %v, want store.ErrUnavailable", err)
	}
	if st := j.State(id); st.OpenTurn != "t1" || st.LastSeq != 1 {
		t.Fatalf("state on a full disk %+v: the turn is open, nothing more stored", st)
	}
	if st := j.Stats(); st.Unavailable == "" || st.Held == 0 || st.UnavailableSince.IsZero() {
		t.Fatalf("stats on a full disk: %+v", st)
	}

	disk.free(t)
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("drain once space returned: %v", err)
	}
	for i, typ := range []string{event.MessageDelta, event.TurnCompleted} {
		ev, err := sub.Next(ctx)
		if err != nil || ev.Seq != uint64(2+i) || ev.Type != typ {
			t.Fatalf("published %d: %d %s %v, want %d %s", i, ev.Seq, ev.Type, err, 2+i, typ)
		}
	}
	if st := j.State(id); st.OpenTurn != "" || st.LastSeq != 3 || st.Lost != 0 {
		t.Fatalf("state once space returned: %+v", st)
	}
	if err := j.Unavailable(); err != nil {
		t.Fatalf("still unavailable: %v", err)
	}
	if st := j.Stats(); st.Unavailable != "" || st.Held != 0 {
		t.Fatalf("stats once space returned: %+v", st)
	}
	if _, err := j.Append(ctx, "sess-other", delta("", "later")); err != nil {
		t.Fatalf("append once space returned: %v", err)
	}
}

// TestStoreFullHeldBoundIsALoss: rows held past Options.HeldBytes are
// dropped, and journaled as a loss (the open turn failed) when space
// returns: memory stays bounded, the loss is visible.
func TestStoreFullHeldBoundIsALoss(t *testing.T) {
	j, disk := openOnTmpfs(t, Options{CoalesceWindow: -1, HeldBytes: 64 << 10})
	ctx := ctxT(t)
	const id = "sess-bound"
	s := j.Sink(id)
	if _, err := s.Commit(ctx, event.New(event.TurnStarted, "t1", event.TurnStartedData{TurnID: "t1", Text: "x"})); err != nil {
		t.Fatal(err)
	}
	disk.fillUp(t)
	s.Append(big("t1"))
	if err := s.Drain(ctx); !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, ErrLost) {
		t.Fatalf("drain on a full disk: %v", err)
	}
	disk.free(t)
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("drain once space returned: %v", err)
	}
	evs, _, _, err := j.Read(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[1].Type != event.JournalLoss || evs[2].Type != event.TurnCompleted ||
		!strings.Contains(string(evs[2].Data), event.ReasonJournalLoss) {
		t.Fatalf("journal %v", evs)
	}
	if st := j.State(id); st.OpenTurn != "" || st.Lost != 1 {
		t.Fatalf("state %+v", st)
	}
	// The writer counts the dropped event once, when it fails the held
	// batch (Stats.Lost), as the journal's loss row says.
	if st := j.Stats(); st.Lost != 1 {
		t.Fatalf("Stats.Lost %d after one dropped event, want 1", st.Lost)
	}
}
