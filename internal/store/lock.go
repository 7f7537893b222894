package store

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// openLocked opens path and takes its flock (exclusive for a writer,
// shared for a reader) within timeout, polling as bbolt does (flock has no
// timed wait). The lock comes before any read of the file: a daemon
// running on it may be mid-commit. bbolt later locks the same descriptor
// again, which succeeds at once.
func openLocked(path string, flag int, exclusive bool, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	return flockWithin(f, path, exclusive, timeout)
}

// lockInherited checks that f (a descriptor inherited through a live
// upgrade's exec) is the file at path, and takes its exclusive flock: the
// same open file still holds it, so that succeeds at once. f is closed on
// error.
func lockInherited(f *os.File, path string, timeout time.Duration) (*os.File, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("inherited store descriptor: %w", err)
	}
	pi, err := os.Stat(path)
	if err != nil || !os.SameFile(fi, pi) {
		f.Close()
		return nil, fmt.Errorf("inherited store descriptor %d is not %s (%v)", f.Fd(), path, err)
	}
	return flockWithin(f, path, true, timeout)
}

func flockWithin(f *os.File, path string, exclusive bool, timeout time.Duration) (*os.File, error) {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	deadline := time.Now().Add(timeout)
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, ErrLocked)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
