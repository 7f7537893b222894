package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BucketRuntimes holds one RuntimeRecord per shared runtime the daemon
// started and has not yet proven gone (runtimes/<runtimeId>).
var BucketRuntimes = []byte("runtimes")

// RuntimeOwner is a runtime's process as a lease names its owner: pid,
// start ticks and boot id (proc.Identity) and the token of its spawn.
type RuntimeOwner struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"startTicks"`
	BootID     string `json:"bootId"`
	SpawnToken string `json:"spawnToken"`
}

// RuntimeRecord is a shared runtime in the store: written (and fsynced,
// as every bbolt commit) once its process is spawned, before any thread
// starts on it; Sessions rewritten on each bind and unbind; deleted once
// its process is proven gone. Startup reaps a crashed run's runtimes by
// these records' owners, also when the /proc tag scan cannot run, and
// closes the sessions they name.
type RuntimeRecord struct {
	ID        string       `json:"runtimeId"`
	Profile   string       `json:"profile"`
	Account   string       `json:"account"`
	Owner     RuntimeOwner `json:"owner"`
	Sessions  []string     `json:"sessions"` // bound sessions, sorted
	StartedAt time.Time    `json:"startedAt"`
}

// PutRuntime writes r (its Sessions sorted).
func (s *Store) PutRuntime(r RuntimeRecord) error {
	r.Sessions = slices.Sorted(slices.Values(r.Sessions))
	if r.Sessions == nil {
		r.Sessions = []string{}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("runtime %s: encode record: %w", r.ID, err)
	}
	return Update(s.DB, func(tx *bolt.Tx) error {
		return tx.Bucket(BucketRuntimes).Put([]byte(r.ID), b)
	})
}

// SetRuntimeSessions rewrites the bound sessions of runtime id's record
// in one transaction (ErrNotFound: no record; ErrDamaged: it does not
// decode).
func (s *Store) SetRuntimeSessions(id string, sessions []string) error {
	sessions = slices.Sorted(slices.Values(sessions))
	if sessions == nil {
		sessions = []string{}
	}
	return Update(s.DB, func(tx *bolt.Tx) error {
		bk := tx.Bucket(BucketRuntimes)
		raw := bk.Get([]byte(id))
		if raw == nil {
			return fmt.Errorf("runtime %s: %w", id, ErrNotFound)
		}
		var r RuntimeRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("runtime %s: %w: %w", id, ErrDamaged, err)
		}
		r.Sessions = sessions
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return bk.Put([]byte(id), b)
	})
}

// GetRuntime reads one runtime record.
func (s *Store) GetRuntime(id string) (RuntimeRecord, error) {
	var r RuntimeRecord
	err := View(s.DB, func(tx *bolt.Tx) error {
		var raw []byte
		if bk := tx.Bucket(BucketRuntimes); bk != nil {
			raw = bk.Get([]byte(id))
		}
		if raw == nil {
			return fmt.Errorf("runtime %s: %w", id, ErrNotFound)
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("runtime %s: %w: %w", id, ErrDamaged, err)
		}
		return nil
	})
	return r, err
}

// ListRuntimes reads every runtime record in id order. One that does not
// decode is reported through bad (naming the runtime) and skipped. A
// store of an older schema, opened read-only, has none.
func (s *Store) ListRuntimes(bad func(id string, err error)) ([]RuntimeRecord, error) {
	var out []RuntimeRecord
	err := View(s.DB, func(tx *bolt.Tx) error {
		bk := tx.Bucket(BucketRuntimes)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			var r RuntimeRecord
			if err := json.Unmarshal(v, &r); err != nil {
				if bad != nil {
					bad(string(k), fmt.Errorf("runtime %s: %w: %w", k, ErrDamaged, err))
				}
				return nil
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// DeleteRuntime removes runtime id's record (absent is not an error).
func (s *Store) DeleteRuntime(id string) error {
	return Update(s.DB, func(tx *bolt.Tx) error {
		return tx.Bucket(BucketRuntimes).Delete([]byte(id))
	})
}
