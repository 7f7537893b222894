package echo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sessiond/sessiond/internal/provider"
)

// Move is the echo provider's provider.Mover: an account is a home
// (SESSIOND_ECHO_HOME), and a thread's copy is its file there, copied
// into the joining account's home under the same name (a temporary
// name, then a rename: an older copy is replaced whole). The leaving
// home's copy is only read. A joining home that does not exist, or
// cannot be written, fails the move naming the path.
func Move(ctx context.Context, m provider.Move) error {
	if !validThreadID.MatchString(m.ThreadID) {
		return fmt.Errorf("echo move: thread id %q is not one of ours", m.ThreadID)
	}
	from, to := homeOf(m.From), homeOf(m.To)
	src := threadStore{dir: from}.path(m.ThreadID)
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("echo move: %s: %w", src, provider.ErrNoThreadCopy)
	}
	if err != nil {
		return fmt.Errorf("echo move: read %s: %w", src, err)
	}
	defer in.Close()
	if filepath.Clean(from) == filepath.Clean(to) {
		return nil // one home: nothing to carry
	}
	limit := m.MaxBytes
	if limit <= 0 {
		limit = provider.DefaultMoveMaxBytes
	}
	if fi, err := in.Stat(); err == nil && fi.Size() > limit {
		return fmt.Errorf("echo move: %s is %d bytes, over the bound of %d: %w", src, fi.Size(), limit, provider.ErrThreadCopyTooLarge)
	}
	if fi, err := os.Stat(to); err != nil || !fi.IsDir() {
		return fmt.Errorf("echo move: the joining account's home %s is not a directory: %v", to, err)
	}
	tmp, err := os.CreateTemp(to, "."+m.ThreadID+".move-*")
	if err != nil {
		return fmt.Errorf("echo move: write in %s: %w", to, err)
	}
	n, err := io.Copy(tmp, io.LimitReader(in, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("%s grew past the bound of %d bytes while copied: %w", src, limit, provider.ErrThreadCopyTooLarge)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), threadStore{dir: to}.path(m.ThreadID))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("echo move: copy %s into %s: %w", src, to, err)
	}
	return nil
}

// homeOf is the thread directory a process of that env uses.
func homeOf(get func(string) string) string {
	if h := get(HomeEnv); h != "" {
		return h
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("sessiond-echo-%d", os.Getuid()))
}
