package journal

import (
	"errors"
	"testing"

	"github.com/sessiond/sessiond/internal/store"
)

// TestStoreFullCountsFailedCommits: each transaction the store refuses as
// a whole counts in Stats.Failed.
func TestStoreFullCountsFailedCommits(t *testing.T) {
	j, disk := openOnTmpfs(t, Options{})
	ctx := ctxT(t)
	disk.fillUp(t)
	for want := uint64(1); want <= 2; want++ {
		if _, err := j.Append(ctx, "sess-failed", big("")); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("append on a full disk: %v", err)
		}
		if st := j.Stats(); st.Failed != want {
			t.Fatalf("failed %d, want %d", st.Failed, want)
		}
	}
	disk.free(t)
}

// TestStoreFullDrainAfterFailedCommit: a Commit the full store refused
// does not let Drain skip the held rows handed in before it: Drain still
// says the store refuses them.
func TestStoreFullDrainAfterFailedCommit(t *testing.T) {
	j, disk := openOnTmpfs(t, Options{CoalesceWindow: -1})
	ctx := ctxT(t)
	const id = "sess-drain-failed"
	s := j.Sink(id)
	disk.fillUp(t)
	s.Append(big("t1"))
	if _, err := s.Commit(ctx, delta("t1", "sync")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("commit on a full disk: %v", err)
	}
	if err := s.Drain(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("drain after a refused commit: %v, want store.ErrUnavailable", err)
	}
	disk.free(t)
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("drain once space returned: %v", err)
	}
	if st := j.State(id); st.LastSeq != 1 {
		t.Fatalf("state: %+v", st)
	}
}
