package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Record is a stored session: what create wrote plus what later holds
// learned (the provider's thread id).
type Record struct {
	ID        string    `json:"id"`
	Provider  string    `json:"provider"`
	Cwd       string    `json:"cwd"`
	Title     string    `json:"title,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	ThreadID  string    `json:"threadId,omitempty"`
	// ThreadFresh: ThreadID was minted by the daemon and the provider has
	// not begun that thread yet (no turn): a resume it refuses as not
	// found starts it afresh under the same id, with nothing replaced.
	ThreadFresh bool              `json:"threadFresh,omitempty"`
	Env         map[string]string `json:"env,omitempty"` // provider env pinned at create (the account's, since accounts)
	// Account is the profile's account the session runs under ("":
	// a record from before accounts, named by accountOf in the host).
	Account string `json:"account,omitempty"`
	// PendingSwitch is a switch queued behind a running turn, applied
	// right after its turn.completed (or at the next hold).
	PendingSwitch *PendingSwitch `json:"pendingSwitch,omitempty"`
	// Portable: the session's next turn carries its completed history
	// from the journal (a portable account switch started a fresh thread).
	Portable bool            `json:"portable,omitempty"`
	Options  json.RawMessage `json:"options,omitempty"`
	LastExit json.RawMessage `json:"lastExit,omitempty"`
}

// PendingSwitch is a queued account switch.
type PendingSwitch struct {
	To    string `json:"to"`
	Cause string `json:"cause"`
	// RetryTurn, for a rate-limit switch, is the failed turn whose prompt
	// is sent again once switched.
	RetryTurn string `json:"retryTurn,omitempty"`
	// Reason is "thread_busy" when the switch waits for the joining
	// account's runtime to be recycled.
	Reason string `json:"reason,omitempty"`
}

// ErrNotFound means no record has that id.
var ErrNotFound = errors.New("no such session record")

// ErrDamaged means a stored record no longer decodes (damaged on disk).
// ctl doctor reports it; deleting the session is the fix.
var ErrDamaged = errors.New("record does not decode (damaged on disk)")

// PutRecord writes r.
func (s *Store) PutRecord(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("session %s: encode record: %w", r.ID, err)
	}
	return Update(s.DB, func(tx *bolt.Tx) error {
		return tx.Bucket(BucketSessions).Put([]byte(r.ID), b)
	})
}

// UpdateRecord applies fn to the stored record id in one transaction.
func (s *Store) UpdateRecord(id string, fn func(*Record)) error {
	return Update(s.DB, func(tx *bolt.Tx) error {
		bk := tx.Bucket(BucketSessions)
		raw := bk.Get([]byte(id))
		if raw == nil {
			return fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		var r Record
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("session %s: %w: %w", id, ErrDamaged, err)
		}
		fn(&r)
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return bk.Put([]byte(id), b)
	})
}

// GetRecord reads one record.
func (s *Store) GetRecord(id string) (Record, error) {
	var r Record
	err := View(s.DB, func(tx *bolt.Tx) error {
		raw := tx.Bucket(BucketSessions).Get([]byte(id))
		if raw == nil {
			return fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		var err error
		if r, err = decodeRecord(id, raw); err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
		return nil
	})
	return r, err
}

// decodeRecord decodes the record stored under id: one that does not
// decode, or whose id field names another session (a byte flipped in
// it), is ErrDamaged.
func decodeRecord(id string, raw []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	if r.ID != id {
		return Record{}, fmt.Errorf("%w: its id field says %q", ErrDamaged, r.ID[:min(len(r.ID), 128)])
	}
	return r, nil
}

// ListRecords reads every record in id order. A record that does not decode
// is reported through bad and skipped, so one damaged row breaks nothing else.
func (s *Store) ListRecords(bad func(id string, err error)) ([]Record, error) {
	var out []Record
	err := View(s.DB, func(tx *bolt.Tx) error {
		return tx.Bucket(BucketSessions).ForEach(func(k, v []byte) error {
			r, err := decodeRecord(string(k), v)
			if err != nil {
				if bad != nil {
					bad(string(k), err)
				}
				return nil
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// DeleteRecord removes a record (absent is not an error).
func (s *Store) DeleteRecord(id string) error {
	err := Update(s.DB, func(tx *bolt.Tx) error {
		return tx.Bucket(BucketSessions).Delete([]byte(id))
	})
	if err == nil {
		s.forgetChecked(id) // recordcheck.go
	}
	return err
}

// CountRecords returns how many session records are stored, without
// decoding them.
func (s *Store) CountRecords() (int, error) {
	n := 0
	err := View(s.DB, func(tx *bolt.Tx) error {
		n = tx.Bucket(BucketSessions).Stats().KeyN
		return nil
	})
	return n, err
}
