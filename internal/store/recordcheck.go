package store

import (
	"bytes"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// checked remembers, per session id, the stored bytes of the record that
// CheckRecord last decoded: a record whose bytes have not changed since
// then decodes again, so it is not decoded again. Bytes, not a hash, so
// the answer is exactly GetRecord's.
type checked struct {
	mu  sync.Mutex
	raw map[string][]byte
}

// CheckRecord answers what GetRecord would answer for id, without the
// record: nil, ErrNotFound or ErrDamaged. It is the existence check of
// the hot calls (hold, release), which would otherwise decode the record
// on every call only to drop it.
func (s *Store) CheckRecord(id string) error {
	return View(s.DB, func(tx *bolt.Tx) error {
		raw := tx.Bucket(BucketSessions).Get([]byte(id))
		if raw == nil {
			s.forgetChecked(id)
			return fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		s.checked.mu.Lock()
		last, ok := s.checked.raw[id]
		s.checked.mu.Unlock()
		if ok && bytes.Equal(last, raw) {
			return nil
		}
		// decoded outside the lock: other sessions' checks go on
		if _, err := decodeRecord(id, raw); err != nil {
			s.forgetChecked(id)
			return fmt.Errorf("session %s: %w", id, err)
		}
		s.checked.mu.Lock()
		defer s.checked.mu.Unlock()
		if s.checked.raw == nil {
			s.checked.raw = map[string][]byte{}
		}
		s.checked.raw[id] = bytes.Clone(raw) // raw lives only as long as tx
		return nil
	})
}

// forgetChecked drops id's remembered bytes (the record is gone or
// damaged), so the memory holds only records that exist.
func (s *Store) forgetChecked(id string) {
	s.checked.mu.Lock()
	delete(s.checked.raw, id)
	s.checked.mu.Unlock()
}
