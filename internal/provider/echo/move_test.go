package echo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/provider"
)

// TestMoveGrowsPastBound: a thread's copy that grows past the bound
// while it is copied (a FIFO here: its size reads 0) is refused with
// ErrThreadCopyTooLarge, and nothing is left in the joining home.
func TestMoveGrowsPastBound(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	src := filepath.Join(from, "thr_x.jsonl")
	if err := syscall.Mkfifo(src, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		w, err := os.OpenFile(src, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		_, _ = w.Write([]byte(strings.Repeat("x", 20)))
	}()
	env := func(home string) func(string) string {
		return func(k string) string {
			if k == HomeEnv {
				return home
			}
			return ""
		}
	}
	err := Move(context.Background(), provider.Move{From: env(from), To: env(to), ThreadID: "thr_x", MaxBytes: 10})
	if !errors.Is(err, provider.ErrThreadCopyTooLarge) {
		t.Fatalf("err %v", err)
	}
	if left, _ := os.ReadDir(to); len(left) != 0 {
		t.Fatalf("the joining home holds %v", left)
	}
}
