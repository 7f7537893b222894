package journal

import (
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// ErrDedupDamaged: the dedup index cannot be read as the journal wrote it.
var ErrDedupDamaged = errors.New("dedup index damaged")

// LookupClientMessage returns the turn that a clientMessageId started
// (ok false: none did). An error means the index could not be read: the
// caller must not take the message for a new one (it would be sent twice).
func (j *Journal) LookupClientMessage(sessionID, clientMessageID string) (turnID string, ok bool, err error) {
	if n := len(clientMessageID); n > MaxClientMessageIDBytes {
		return "", false, fmt.Errorf("session %s: clientMessageId %q is %d bytes, over the journal's limit of %d: %w",
			prefix(sessionID), prefix(clientMessageID), n, MaxClientMessageIDBytes, ErrBadDraft)
	}
	err = store.View(j.db, func(tx *bolt.Tx) error {
		b := sessionBucket(tx, sessionID)
		if b == nil {
			return nil
		}
		d := b.Bucket(keyDedup)
		if d == nil {
			if b.Get(keyDedup) != nil {
				return fmt.Errorf("%w: %q is a value, not a bucket", ErrDedupDamaged, keyDedup)
			}
			return nil // no clientMessageId yet
		}
		v := d.Get([]byte(clientMessageID))
		switch {
		case v == nil && d.Bucket([]byte(clientMessageID)) != nil:
			return fmt.Errorf("%w: entry %q is a bucket", ErrDedupDamaged, prefix(clientMessageID))
		case v == nil:
			return nil
		case len(v) == 0:
			return fmt.Errorf("%w: entry %q has no turn id", ErrDedupDamaged, prefix(clientMessageID))
		}
		turnID, ok = string(v), true
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("session %s: clientMessageId lookup: %w", prefix(sessionID), err)
	}
	return turnID, ok, nil
}
