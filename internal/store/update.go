package store

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ErrUnavailable means the store could not be written: the commit failed
// (disk full, an I/O error: bbolt's pwrite, ftruncate or fdatasync
// refused). bbolt rolled the transaction back, so nothing of it is stored
// and the file still holds the last committed state; a later commit can
// succeed once the cause is gone.
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
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
