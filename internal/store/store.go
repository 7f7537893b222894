package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// Bucket names shared by the packages that own their contents.
var (
	BucketMeta     = []byte("meta")
	BucketSessions = []byte("sessions")
	BucketLeases   = []byte("leases")
	BucketJournal  = []byte("journal")
)

var (
	keySchemaVersion = []byte("schema_version")
	keyStateID       = []byte("state_id")
	keyCursorKey     = []byte("cursor_key")
)

// cursorKeyLen is the size of the random cursor_key.
const cursorKeyLen = 32

// ErrLocked means another process holds the store's flock: another sessiond
// runs on this state directory.
var ErrLocked = errors.New("store is locked by another sessiond on this state directory")

// ErrSchemaTooNew means the file was written by a newer sessiond.
var ErrSchemaTooNew = errors.New("store schema is newer than this sessiond")

// migration moves the schema from version i to i+1 (index i).
type migration func(tx *bolt.Tx) error

// migrations is ordered; SchemaVersion is its length.
var migrations = []migration{
	// 0 -> 1: the initial bucket tree and the state id.
	func(tx *bolt.Tx) error {
		for _, b := range [][]byte{BucketMeta, BucketSessions, BucketLeases, BucketJournal} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(BucketMeta)
		if meta.Get(keyStateID) == nil {
			var b [8]byte
			if _, err := rand.Read(b[:]); err != nil {
				return err
			}
			return meta.Put(keyStateID, []byte(hex.EncodeToString(b[:])))
		}
		return nil
	},
	// 1 -> 2: cursor_key, the secret agentSession.list signs its cursors
	// with (kept in the store, so a cursor outlives a restart).
	func(tx *bolt.Tx) error {
		meta := tx.Bucket(BucketMeta)
		if len(meta.Get(keyCursorKey)) == cursorKeyLen {
			return nil
		}
		b := make([]byte, cursorKeyLen)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		return meta.Put(keyCursorKey, b)
	},
	// 2 -> 3: runtimes/, one record per shared runtime not yet proven
	// gone (runtimes.go), so startup reaps a crashed run's runtimes by
	// their recorded owner even when the /proc tag scan cannot run.
	func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(BucketRuntimes)
		return err
	},
}

// SchemaVersion is the version this build writes.
var SchemaVersion = uint64(len(migrations))

// Store is the opened database.
type Store struct {
	DB      *bolt.DB
	Path    string
	StateID string
	// CursorKey is the secret agentSession.list's cursors are signed
	// with (meta/cursor_key); nil in a read-only open of a store no
	// writer of this schema has opened yet.
	CursorKey []byte
	// Warnings are what the open noticed and went on: a damaged meta page
	// bbolt fell back from, a new store started after the old one was
	// moved aside. The daemon logs each.
	Warnings []string
	// file is the locked descriptor bbolt runs on: a live upgrade hands it
	// to the next image, so the flock is never let go across the exec.
	file *os.File
	// checked is CheckRecord's memory of records it decoded (recordcheck.go).
	checked checked
}

// File is the store's locked descriptor (bbolt's); it stays the store's.
func (s *Store) File() *os.File { return s.file }

// Close closes the database and its flock.
func (s *Store) Close() error { return s.DB.Close() }

func (s *Store) migrate() error {
	// A store at the schema version is not written: each Update ends in
	// an fdatasync (1-7 ms here), and every start, a live upgrade's new
	// image included, opens the store.
	current := false
	s.DB.View(func(tx *bolt.Tx) error {
		current = tx.Bucket(BucketMeta) != nil && Version(tx) == SchemaVersion
		return nil
	})
	if current {
		return nil
	}
	return s.DB.Update(func(tx *bolt.Tx) error {
		v := Version(tx)
		if v > SchemaVersion {
			return fmt.Errorf("version %d > %d: %w", v, SchemaVersion, ErrSchemaTooNew)
		}
		for ; v < SchemaVersion; v++ {
			if err := migrations[v](tx); err != nil {
				return fmt.Errorf("migration %d -> %d: %w", v, v+1, err)
			}
		}
		return tx.Bucket(BucketMeta).Put(keySchemaVersion, U64(SchemaVersion))
	})
}

// Version reads the schema version inside tx (0 for a new file).
func Version(tx *bolt.Tx) uint64 {
	meta := tx.Bucket(BucketMeta)
	if meta == nil {
		return 0
	}
	b := meta.Get(keySchemaVersion)
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// U64 encodes v as an 8-byte big-endian key.
func U64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// FromU64 decodes an 8-byte big-endian key (0 for anything else).
func FromU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
