package service

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from to to unless to exists (an error that is
// fs.ErrExist then, from is left): renameat2 with RENAME_NOREPLACE, or
// linkNoReplace on a file system that does not support it.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	switch {
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		return linkNoReplace(from, to)
	case err != nil:
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}
