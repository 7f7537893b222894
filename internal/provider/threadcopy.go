package provider

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// CopyThreadFile is the copy a Mover makes: the file at src (the leaving
// account's copy, only ever opened for reading) is written whole to dst
// (the joining account's), through a temporary file in dst's directory
// that is synced and then renamed over dst, so an older copy at dst is
// replaced whole or not at all. A source larger than max bytes (or one
// that grows past it while read) is refused with an error naming the
// path, its size and the bound; an unreadable source or a target that
// cannot be written is an error naming the path. On any error dst is left
// as it was and the temporary file is removed.
func CopyThreadFile(src, dst string, max int64) error {
	if max <= 0 {
		max = DefaultMoveMaxBytes
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("read thread copy %s: %w", src, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("read thread copy %s: %w", src, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("read thread copy %s: not a regular file (%s)", src, st.Mode().Type())
	}
	if st.Size() > max {
		return fmt.Errorf("thread copy %s is %d bytes, over the bound of %d: %w", src, st.Size(), max, ErrThreadCopyTooLarge)
	}
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write thread copy: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write thread copy into %s: %w", dir, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, io.LimitReader(in, max+1))
	switch {
	case err != nil && isReadErr(err, in):
		return fmt.Errorf("read thread copy %s: %w", src, err)
	case err != nil:
		return fmt.Errorf("write thread copy %s: %w", tmp.Name(), err)
	case n > max:
		return fmt.Errorf("thread copy %s grew past the bound of %d bytes while copied: %w", src, max, ErrThreadCopyTooLarge)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write thread copy %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write thread copy %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("write thread copy %s: %w", dst, err)
	}
	done = true
	if d, err := os.Open(dir); err == nil { // the rename itself durable
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// isReadErr tells whether io.Copy's error came from reading in: a
// *fs.PathError naming in's file.
func isReadErr(err error, in *os.File) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Path == in.Name()
}

// ErrThreadCopyTooLarge means a thread's copy is over Move.MaxBytes.
var ErrThreadCopyTooLarge = errors.New("thread copy too large")
