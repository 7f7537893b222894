package store

import (
	"bytes"
	"encoding/json"
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
		s.checked.mu.Lock()
		defer s.checked.mu.Unlock()
		if raw == nil {
			delete(s.checked.raw, id)
			return fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		if last, ok := s.checked.raw[id]; ok && bytes.Equal(last, raw) {
			return nil
		}
		var r Record
		if err := json.Unmarshal(raw, &r); err != nil {
			delete(s.checked.raw, id)
			return fmt.Errorf("session %s: %w: %w", id, ErrDamaged, err)
		}
		if s.checked.raw == nil {
			s.checked.raw = map[string][]byte{}
		}
		s.checked.raw[id] = bytes.Clone(raw) // raw lives only as long as tx
		return nil
	})
}
