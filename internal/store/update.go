package store

import (
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrUnavailable means the store could not be written (or read): the
// commit failed (disk full, an I/O error: bbolt's pwrite, ftruncate or
// fdatasync refused), or bbolt no longer has the file mapped (a remap that
// failed on an I/O error leaves it unmapped: every later transaction is
// refused with "database isn't correctly mapped"). bbolt rolled the
// transaction back, so nothing of it is stored and the file still holds
// the last committed state; a later commit can succeed once the cause is
// gone (an unmapped store only after a restart).
var ErrUnavailable = errors.New("store unavailable")

// Update runs fn in a write transaction. An error fn returned is passed
// through as is; any other (bbolt could not begin or commit the
// transaction) wraps ErrUnavailable.
func Update(db *bolt.DB, fn func(*bolt.Tx) error) error {
	var fnErr error
	err := db.Update(func(tx *bolt.Tx) error {
		fnErr = fn(tx)
		return fnErr
	})
	if err != nil && fnErr == nil {
		return unavailable(db, err)
	}
	return err
}

// View runs fn in a read transaction. An error fn returned is passed
// through as is; bbolt refusing to begin the transaction (the store is
// unmapped or closed) wraps ErrUnavailable.
func View(db *bolt.DB, fn func(*bolt.Tx) error) error {
	var fnErr error
	err := db.View(func(tx *bolt.Tx) error {
		fnErr = fn(tx)
		return fnErr
	})
	if err != nil && fnErr == nil {
		return unavailable(db, err)
	}
	return err
}

// unavailable wraps a failure of bbolt itself in ErrUnavailable, naming
// the file when bbolt's error does not.
func unavailable(db *bolt.DB, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	if mapping(err) && !strings.Contains(err.Error(), db.Path()) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, db.Path(), err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// mapping reports bbolt's errors of a store it cannot use: not mapped
// (after a remap failed), not open, or its mapping failing to grow
// ("mmap allocate error", formatted by bbolt without wrapping its cause).
func mapping(err error) bool {
	return errors.Is(err, berrors.ErrInvalidMapping) || errors.Is(err, berrors.ErrDatabaseNotOpen) ||
		strings.Contains(err.Error(), "mmap allocate error")
}

// IsUnavailable reports an error of a store that cannot be used now: one
// wrapping ErrUnavailable, or bbolt's own mapping errors reaching a caller
// by a path that did not go through Update or View.
func IsUnavailable(err error) bool {
	return err != nil && (errors.Is(err, ErrUnavailable) || mapping(err))
}
