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
