package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// Open opens (creating if needed) <dir>/sessiond.db, taking its flock within
// lockTimeout, validates it, and migrates it to SchemaVersion. A damaged
// file, or a missing or empty one in a state directory used before, is a
// *RefusalError (ErrCorrupt, ErrLost); another daemon on it is ErrLocked.
func Open(dir string, lockTimeout time.Duration) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	return open(dir, lockTimeout, false, nil)
}

// OpenInherited opens the store on f, the locked descriptor a live
// upgrade's old image handed over (the same open file, so its flock was
// never released across the exec). f must be <dir>/sessiond.db itself.
func OpenInherited(dir string, f *os.File, lockTimeout time.Duration) (*Store, error) {
	return open(dir, lockTimeout, false, f)
}

// OpenReadOnly opens the store for reading with a shared flock (ctl
// doctor), validated as Open does; no migration, nothing written.
// ErrNoStore when there is no store and Open would start an empty one.
func OpenReadOnly(dir string, lockTimeout time.Duration) (*Store, error) {
	return open(dir, lockTimeout, true, nil)
}

// open: (1) a missing file: created only if the state dir was never used
// or the operator moved the old store aside; (2) the flock; (3) an empty
// file: the same decision; a non-empty one is checked against its meta
// pages and walked, all before bbolt maps it; (4) bbolt opens the file;
// (5) its consistency check; (6) migration and the marker.
func open(dir string, lockTimeout time.Duration, readOnly bool, inherited *os.File) (*Store, error) {
	path := filepath.Join(dir, dbName)
	var fresh bool
	var replaces []string
	var warnings []string
	decide := func(empty bool) error {
		r, w, err := freshStart(dir, path, empty)
		if err != nil {
			return err
		}
		if readOnly {
			if w != "" {
				return fmt.Errorf("%s: %w (the old one was moved aside; serve starts a new one)", path, ErrNoStore)
			}
			return fmt.Errorf("%s: %w", path, ErrNoStore)
		}
		fresh, replaces = true, r
		if w != "" {
			warnings = append(warnings, w)
		}
		return nil
	}
	if fi, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := decide(false); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	} else if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	// O_NONBLOCK: a FIFO put there after the check above must not block
	// the open (a reader of one waits for a writer forever); the fstat
	// below refuses it.
	flag := os.O_RDONLY | unix.O_NONBLOCK
	if !readOnly {
		flag = os.O_RDWR | os.O_CREATE | unix.O_NONBLOCK
	}
	var f *os.File
	var err error
	if inherited != nil {
		f, err = lockInherited(inherited, path, lockTimeout)
	} else {
		f, err = openLocked(path, flag, !readOnly, lockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(path, fi.Mode())
	}
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil { // a regular file: blocking I/O as before
		f.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if fi.Size() == 0 {
		if !fresh {
			if err := decide(true); err != nil {
				f.Close()
				return nil, err
			}
		}
	} else {
		fresh, replaces, warnings = false, nil, nil // another sessiond created it meanwhile
		fm, err := validateMeta(f)
		if err == nil {
			err = contained(func() error { return walkFile(f, fm.meta) })
		}
		if err != nil {
			f.Close()
			return nil, corrupt(path, err)
		}
		if fm.fallback != "" {
			warnings = append(warnings, "a meta page is damaged: "+fm.fallback)
		}
	}
	db, err := openBolt(f, readOnly)
	if err != nil {
		f.Close()
		if fresh {
			return nil, fmt.Errorf("create store %s: %w", path, err)
		}
		return nil, corrupt(path, err)
	}
	if err := checkDB(db); err != nil {
		if errors.Is(err, errPanicked) {
			f.Close() // bbolt may hold its locks: Close could block
		} else {
			db.Close()
		}
		return nil, corrupt(path, err)
	}
	s := &Store{DB: db, Path: path, Warnings: warnings, file: f}
	if err := s.finish(dir, readOnly, fresh, replaces); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}

// finish migrates (writer only), reads the state id, and keeps the marker
// in step with the store.
func (s *Store) finish(dir string, readOnly, fresh bool, replaces []string) error {
	if !readOnly {
		if err := s.migrate(); err != nil {
			return err
		}
	}
	s.DB.View(func(tx *bolt.Tx) error {
		if m := tx.Bucket(BucketMeta); m != nil {
			s.StateID = string(m.Get(keyStateID))
			if k := m.Get(keyCursorKey); len(k) == cursorKeyLen {
				s.CursorKey = append([]byte(nil), k...)
			}
		}
		return nil
	})
	if readOnly {
		return nil
	}
	w, err := s.checkHome()
	if err != nil {
		return err
	}
	if w != "" {
		s.Warnings = append(s.Warnings, w)
	}
	m, ok, err := readMarker(dir)
	if err != nil {
		return err
	}
	switch {
	case fresh:
		m = marker{StateID: s.StateID, CreatedAt: time.Now().UTC(), Replaces: replaces}
	case ok && m.StateID == s.StateID:
		return nil
	default: // a store from before the marker, or another one restored here
		m.StateID = s.StateID
		if m.CreatedAt.IsZero() {
			m.CreatedAt = time.Now().UTC()
		}
	}
	return writeMarker(dir, m)
}
