// Package lease keeps one lease record per session in the store's
// `leases/<sessionId>` bucket (JSON) and moves it between released, reserved
// and live with compare-and-set transitions, each one bbolt transaction.
//
// The fence only grows. A grant over a previous owner (a reserved or live
// record) is made only when an injected Prober proves that owner dead, and the
// proof is recorded as death evidence; an owner proven alive is ErrOwned, an
// owner that cannot be verified is ErrUnverifiable: never a second owner.
// Commit and Release name the fence they act on; a stale one changes nothing.
package lease

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Status is where a lease stands.
type Status int

// Lease statuses.
const (
	Released Status = iota // nobody owns the session
	Reserved               // granted to a spawn that has not committed its process yet
	Live                   // owned by a running process
)

var statusNames = [...]string{Released: "released", Reserved: "reserved", Live: "live"}

// String is the wire name: released, reserved or live.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// MarshalText stores the status by name.
func (s Status) MarshalText() ([]byte, error) {
	if s < 0 || int(s) >= len(statusNames) {
		return nil, fmt.Errorf("lease: %w: %d", ErrBadStatus, int(s))
	}
	return []byte(statusNames[s]), nil
}

// UnmarshalText reads a status name.
func (s *Status) UnmarshalText(b []byte) error {
	for i, n := range statusNames {
		if n == string(b) {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("lease: %w: %q", ErrBadStatus, b)
}

// Owner is the process that holds (or, while reserved, will hold) a lease.
// While reserved only SpawnToken is set.
type Owner struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"startTicks"`
	BootID     string `json:"bootId"`
	SpawnToken string `json:"spawnToken"`
}

// EvidenceKind says how an owner was proven gone.
type EvidenceKind string

// Kinds of death evidence.
const (
	EvidenceExitObserved     EvidenceKind = "exit-observed"     // Wait returned for the owner
	EvidencePidAbsent        EvidenceKind = "pid-absent"        // no process with that pid
	EvidenceIdentityMismatch EvidenceKind = "identity-mismatch" // the pid was reused by another process
	EvidenceBootChanged      EvidenceKind = "boot-changed"      // the machine rebooted since
)

// Evidence is the proof that the previous owner is gone.
type Evidence struct {
	Kind EvidenceKind `json:"kind"`
	At   time.Time    `json:"at"`
}

// Record is one session's lease.
type Record struct {
	Fence         uint64    `json:"fence"`
	Status        Status    `json:"status"`
	Owner         *Owner    `json:"owner,omitempty"`
	DeathEvidence *Evidence `json:"deathEvidence,omitempty"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

// Liveness is what a Prober found out about an owner.
type Liveness int

// Probe answers. Only Alive and Unverifiable refuse a grant.
const (
	Alive            Liveness = iota // the owner's process runs, same identity
	PidAbsent                        // no process with that pid
	IdentityMismatch                 // the pid belongs to another process now
	BootChanged                      // recorded on another boot
	Unverifiable                     // could not tell
)

var livenessNames = [...]string{Alive: "alive", PidAbsent: "pid-absent",
	IdentityMismatch: "identity-mismatch", BootChanged: "boot-changed", Unverifiable: "unverifiable"}

func (l Liveness) String() string {
	if l >= 0 && int(l) < len(livenessNames) {
		return livenessNames[l]
	}
	return fmt.Sprintf("liveness(%d)", int(l))
}

// evidence maps a dead verdict to its evidence kind ("" for Alive/Unverifiable).
func (l Liveness) evidence() EvidenceKind {
	switch l {
	case PidAbsent:
		return EvidencePidAbsent
	case IdentityMismatch:
		return EvidenceIdentityMismatch
	case BootChanged:
		return EvidenceBootChanged
	}
	return ""
}

// Prober checks whether a recorded owner still runs.
type Prober func(Owner) Liveness

// Grant is a successful Acquire: the new fence, the token the spawn must
// Commit with, and the evidence that the previous owner (if any) is gone.
type Grant struct {
	Fence      uint64
	SpawnToken string
	Evidence   *Evidence
}

// Errors of the lease transitions.
var (
	// ErrOwned: the lease is held by an owner proven alive; the
	// *OwnedError carrying it names the pid.
	ErrOwned = errors.New("lease owned by a live process")
	// ErrUnverifiable: the current owner could not be proven dead or alive
	// (or a reservation has no process to probe); nothing was granted.
	ErrUnverifiable = errors.New("lease owner unverifiable")
	// ErrStaleFence: the operation named a fence other than the record's.
	ErrStaleFence = errors.New("stale fence")
	// ErrNotReserved: Commit at the right fence but the record is not
	// reserved for that spawn token.
	ErrNotReserved = errors.New("lease not reserved for this spawn")
	// ErrNotReleased: Delete of a lease that is reserved or live.
	ErrNotReleased = errors.New("lease not released")
	// ErrBadStatus: a status value or name outside released|reserved|live.
	ErrBadStatus = errors.New("bad lease status")
	// ErrBadRecord: a stored record that does not decode.
	ErrBadRecord = errors.New("bad lease record")
)

// OwnedError is ErrOwned with the owner's pid.
type OwnedError struct {
	SessionID string
	PID       int
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("lease %s: owned by live pid %d", e.SessionID, e.PID)
}

// Unwrap yields ErrOwned, so errors.Is(err, ErrOwned) works.
func (e *OwnedError) Unwrap() error { return ErrOwned }

func decode(id string, b []byte) (Record, error) {
	var r Record
	if b == nil {
		return r, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("lease %s: %w: %w", id, ErrBadRecord, err)
	}
	return r, nil
}
