package store

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
)

// Refusals of Open and OpenReadOnly: the daemon does not start and never
// deletes or overwrites the file. Both come as a *RefusalError.
var (
	// ErrCorrupt means sessiond.db fails its own meta pages, the page walk
	// or bbolt's consistency check.
	ErrCorrupt = errors.New("store is corrupt")
	// ErrLost means sessiond.db is missing or empty although the state
	// directory shows earlier use (the marker file or provider dirs):
	// starting an empty store would silently lose every session.
	ErrLost = errors.New("store is missing or empty in a state directory used before")
)

// ErrNoStore means OpenReadOnly found no store to read (a state directory
// never used, or one whose old store was moved aside).
var ErrNoStore = errors.New("no store")

// RefusalError is a store that must not be opened: which file, what is
// wrong with it, and the one-line fix an operator runs.
type RefusalError struct {
	Path   string
	Kind   error // ErrCorrupt or ErrLost
	Reason string
	Fix    string
	Cause  error // the check that failed, if any
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("%s: %v: %s", e.Path, e.Kind, e.Reason)
}

func (e *RefusalError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Cause}
}

// Names of the files next to sessiond.db. A file named with one of the
// aside prefixes that the marker does not list yet is the operator's
// acknowledgement that the store is gone: the next start begins an empty
// one and records the name.
const (
	dbName       = "sessiond.db"
	markerName   = dbName + ".created"
	corruptAside = dbName + ".corrupt-"
	lostAside    = dbName + ".lost-"
)

func stamp(now time.Time) string { return now.UTC().Format("20060102T150405Z") }

func corrupt(path string, cause error) *RefusalError {
	return &RefusalError{Path: path, Kind: ErrCorrupt, Reason: cause.Error(), Cause: cause, Fix: fixMoveAside(path)}
}

// notRegular refuses a sessiond.db that is not a regular file (a named
// pipe, a socket, a device, a directory): bbolt cannot map it, and a read
// of a FIFO blocks for good. The fix moves it aside as for a corrupt store.
func notRegular(path string, mode fs.FileMode) *RefusalError {
	cause := fmt.Errorf("not a regular file (%s, mode %s)", fileKind(mode), mode)
	q := shellQuote(path)
	return &RefusalError{Path: path, Kind: ErrCorrupt, Reason: cause.Error(), Cause: cause,
		Fix: fmt.Sprintf("mv %s %s   # sessiond.db must be a regular file; then start sessiond again: a new, empty store",
			q, shellQuote(path+".corrupt-"+stamp(time.Now())))}
}

func fileKind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode.IsDir():
		return "a directory"
	}
	return "not a file"
}

// fixMoveAside: move the file aside under a dated name; the next start
// begins an empty store.
func fixMoveAside(path string) string {
	q := shellQuote(path)
	return fmt.Sprintf("mv %s %s   # then start sessiond again: a new, empty store; the sessions in the moved file are lost",
		q, shellQuote(path+".corrupt-"+stamp(time.Now())))
}

// fixLost: nothing to move; a dated file acknowledges the loss.
func fixLost(path string) string {
	return fmt.Sprintf("restore %s from a backup, or accept that its sessions are lost: touch %s   # then start sessiond again",
		shellQuote(path), shellQuote(path+".lost-"+stamp(time.Now())))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
