package lease

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/store"
	bolt "go.etcd.io/bbolt"
)

// Manager performs lease transitions on the store. It is safe for
// concurrent use: every transition is one db.Update, which bbolt serializes,
// and reads the record it compares against inside that transaction.
type Manager struct {
	db    *bolt.DB
	probe Prober
	now   func() time.Time
}

// New returns a Manager over db (whose `leases` bucket must exist, as
// store.Open makes it). now nil means time.Now.
func New(db *bolt.DB, probe Prober, now func() time.Time) *Manager {
	if now == nil {
		now = time.Now
	}
	return &Manager{db: db, probe: probe, now: now}
}

// Get returns the session's lease; a session without one has the zero
// Record (released at fence 0).
func (m *Manager) Get(id string) (Record, error) {
	var r Record
	err := store.View(m.db, func(tx *bolt.Tx) error {
		var err error
		r, err = decode(id, bucket(tx).Get([]byte(id)))
		return err
	})
	return r, err
}

// List returns every stored lease by session id. A record that does not
// decode (ErrBadRecord) is reported through bad (when not nil) and left
// out, so one damaged row breaks nothing else.
func (m *Manager) List(bad func(id string, err error)) (map[string]Record, error) {
	out := map[string]Record{}
	err := store.View(m.db, func(tx *bolt.Tx) error {
		return bucket(tx).ForEach(func(k, v []byte) error {
			r, err := decode(string(k), v)
			if err != nil {
				if bad != nil {
					bad(string(k), err)
				}
				return nil
			}
			out[string(k)] = r
			return nil
		})
	})
	return out, err
}

// Acquire grants the lease at fence+1 with a fresh spawn token.
//
// From released (or no record) it always grants. From reserved or live it
// probes the recorded owner: proven dead (pid-absent, identity-mismatch,
// boot-changed) grants and records the evidence; alive is an *OwnedError
// (ErrOwned); unverifiable is ErrUnverifiable. A reservation whose spawn never
// committed a process has nothing to probe and is ErrUnverifiable: only a
// Release at its fence (the spawner's, or the startup reap's) frees it.
// The prober runs inside the transaction, so nothing can change between the
// probe and the grant.
func (m *Manager) Acquire(id string) (Grant, error) {
	token, err := newToken()
	if err != nil {
		return Grant{}, fmt.Errorf("lease %s: spawn token: %w", id, err)
	}
	var g Grant
	err = m.update(id, func(r *Record) error {
		var ev *Evidence
		if r.Status != Released {
			if r.Owner == nil || r.Owner.PID <= 0 {
				return fmt.Errorf("lease %s: %s at fence %d with no process to probe: %w",
					id, r.Status, r.Fence, ErrUnverifiable)
			}
			l := m.probe(*r.Owner)
			switch l {
			case Alive:
				return &OwnedError{SessionID: id, PID: r.Owner.PID}
			case PidAbsent, IdentityMismatch, BootChanged:
				ev = &Evidence{Kind: l.evidence(), At: m.now()}
			default:
				return fmt.Errorf("lease %s: owner pid %d %s: %w", id, r.Owner.PID, l, ErrUnverifiable)
			}
		}
		*r = Record{Fence: r.Fence + 1, Status: Reserved, Owner: &Owner{SpawnToken: token},
			DeathEvidence: ev, UpdatedAt: m.now()}
		g = Grant{Fence: r.Fence, SpawnToken: token, Evidence: ev}
		return nil
	})
	return g, err
}

// Commit makes a reservation live with its process. It succeeds only on a
// record reserved at fence for token (or, idempotently, already live with
// that very owner); another fence is ErrStaleFence, another token or status
// ErrNotReserved.
func (m *Manager) Commit(id string, fence uint64, token string, owner Owner) error {
	owner.SpawnToken = token
	return m.update(id, func(r *Record) error {
		if r.Fence != fence {
			return fmt.Errorf("lease %s: commit at fence %d, record at %d: %w", id, fence, r.Fence, ErrStaleFence)
		}
		if r.Status == Live && r.Owner != nil && *r.Owner == owner {
			return errUnchanged
		}
		if r.Status != Reserved || r.Owner == nil || r.Owner.SpawnToken != token {
			return fmt.Errorf("lease %s: commit at fence %d: record %s: %w", id, fence, r.Status, ErrNotReserved)
		}
		r.Status = Live
		r.Owner = &owner
		r.UpdatedAt = m.now()
		return nil
	})
}

// Release frees the lease if it is still at fence, recording ev (the proof
// the owner ended; may be nil). It reports whether it changed the record: a
// release at another fence is (false, ErrStaleFence) and changes nothing; an
// already released lease at that fence is (false, nil).
func (m *Manager) Release(id string, fence uint64, ev *Evidence) (bool, error) {
	changed := false
	err := m.update(id, func(r *Record) error {
		if r.Fence != fence {
			return fmt.Errorf("lease %s: release at fence %d, record at %d: %w", id, fence, r.Fence, ErrStaleFence)
		}
		if r.Status == Released {
			return errUnchanged
		}
		*r = Record{Fence: r.Fence, Status: Released, DeathEvidence: ev, UpdatedAt: m.now()}
		changed = true
		return nil
	})
	return changed, err
}

// Delete removes a released lease (the session is being deleted). A lease
// that is reserved or live is ErrNotReleased.
func (m *Manager) Delete(id string) error {
	return store.Update(m.db, func(tx *bolt.Tx) error {
		b := bucket(tx)
		r, err := decode(id, b.Get([]byte(id)))
		if errors.Is(err, ErrBadRecord) {
			// Nothing can be learnt from it: deleting the session is the
			// operator's fix (ctl doctor), and the caller made sure no
			// child of this daemon runs for it.
			return b.Delete([]byte(id))
		}
		if err != nil {
			return err
		}
		if r.Status != Released {
			return fmt.Errorf("lease %s: delete while %s at fence %d: %w", id, r.Status, r.Fence, ErrNotReleased)
		}
		return b.Delete([]byte(id))
	})
}

// errUnchanged ends an update fn without writing and without an error.
var errUnchanged = errors.New("unchanged")

// update runs fn on the current record in one write transaction and stores
// the result unless fn fails (or returns errUnchanged).
func (m *Manager) update(id string, fn func(*Record) error) error {
	err := store.Update(m.db, func(tx *bolt.Tx) error {
		b := bucket(tx)
		r, err := decode(id, b.Get([]byte(id)))
		if err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
		v, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("lease %s: %w", id, err)
		}
		return b.Put([]byte(id), v)
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

func bucket(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(store.BucketLeases) }

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
