package store

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// errPanicked marks a contained call that panicked or faulted (in the walk
// or in bbolt): bbolt may
// hold its locks, so the DB must not be closed (only the file).
var errPanicked = errors.New("unreadable")

// contained runs fn on the calling goroutine with memory faults turned into
// panics (runtime/debug.SetPanicOnFault applies to one goroutine only and
// is restored on return) and any panic turned into an error wrapping
// errPanicked, its message cut short: never a stack trace.
func contained(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s", errPanicked, short(fmt.Sprint(r)))
		}
	}()
	return fn()
}

// short cuts a message from bbolt (its check errors carry key dumps and
// page stacks) to one line of at most 200 bytes.
func short(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// openBolt hands the validated, locked file f to bbolt (bbolt's own flock
// of the same descriptor succeeds at once), contained.
func openBolt(f *os.File, readOnly bool) (*bolt.DB, error) {
	var db *bolt.DB
	err := contained(func() error {
		var err error
		db, err = bolt.Open(f.Name(), 0o600, &bolt.Options{
			ReadOnly:        readOnly,
			PreLoadFreelist: true, // read the freelist here, not on the check's goroutine
			OpenFile:        func(string, int, os.FileMode) (*os.File, error) { return f, nil },
		})
		return err
	})
	return db, err
}

// checkDB runs bbolt's consistency check (tx.Check: every page reachable
// or free and never both, key order, no page referenced twice) in a read
// transaction. Check runs on its own goroutine and recovers its panics
// into errors itself; walkFile proved beforehand that it cannot fault.
func checkDB(db *bolt.DB) error {
	return contained(func() error {
		return db.View(func(tx *bolt.Tx) error {
			var first []string
			n := 0
			for err := range tx.Check() {
				if n++; len(first) < 3 {
					first = append(first, short(err.Error()))
				}
			}
			if n > 0 {
				return fmt.Errorf("bbolt consistency check: %d problem(s): %s", n, strings.Join(first, "; "))
			}
			return nil
		})
	})
}
