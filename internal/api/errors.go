// Package api holds what the RPC layer and the host agree on: the wire
// types of PROTOCOL.md, the error kinds (rpc maps each to a code and a
// data.reason in one table), and the Backend interface rpc calls.
package api

import (
	"errors"
	"fmt"
)

// Kind is a class of failure that a client can match on.
type Kind int

// Error kinds, one per data.reason of PROTOCOL.md's error table.
const (
	KindInternal Kind = iota
	KindInvalidParams
	KindNotInitialized
	KindUnsupportedProtocol
	KindSessionNotFound
	KindSessionNotLive
	KindSessionOwned
	KindStaleFence
	KindEvictionFailed
	KindExitUnproven
	KindProviderFailed
	KindTurnRunning
	KindInvalidState
	KindLimitExceeded
	KindUnknownProvider
	KindCursorAhead
	KindCursorCompacted
	KindRequestNotFound
	KindUpgradeRefused
	KindSessionDamaged
	KindStoreUnavailable
	KindThreadBusy
	KindUnknownAccount
)

var kindNames = [...]string{
	KindInternal:            "internal_error",
	KindInvalidParams:       "invalid_params",
	KindNotInitialized:      "not_initialized",
	KindUnsupportedProtocol: "unsupported_protocol",
	KindSessionNotFound:     "session_not_found",
	KindSessionNotLive:      "session_not_live",
	KindSessionOwned:        "session_owned",
	KindStaleFence:          "stale_fence",
	KindEvictionFailed:      "eviction_failed",
	KindExitUnproven:        "exit_unproven",
	KindProviderFailed:      "provider_failed",
	KindTurnRunning:         "turn_running",
	KindInvalidState:        "invalid_state",
	KindLimitExceeded:       "limit_exceeded",
	KindUnknownProvider:     "unknown_provider",
	KindCursorAhead:         "cursor_ahead",
	KindCursorCompacted:     "cursor_compacted",
	KindRequestNotFound:     "request_not_found",
	KindUpgradeRefused:      "upgrade_refused",
	KindSessionDamaged:      "session_damaged",
	KindStoreUnavailable:    "store_unavailable",
	KindThreadBusy:          "thread_busy",
	KindUnknownAccount:      "unknown_account",
}

// String is the data.reason of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is a failure with a kind and the data fields PROTOCOL.md names for
// it (data.field, data.step, …). Err, when set, is the underlying cause.
type Error struct {
	Kind Kind
	Msg  string
	Data map[string]any
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches any *Error of the same kind, so errors.Is(err, api.ErrSessionNotFound)
// works whatever the message or data.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Kind == e.Kind
	}
	return false
}

// Errorf builds an *Error of kind k with data (may be nil).
func Errorf(k Kind, data map[string]any, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Data: data}
}

// InvalidParam reports a bad or missing field.
func InvalidParam(field, format string, args ...any) *Error {
	return &Error{Kind: KindInvalidParams, Msg: field + ": " + fmt.Sprintf(format, args...),
		Data: map[string]any{"field": field}}
}

// KindOf returns the kind of err, KindInternal when it carries none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// Sentinels for errors.Is; each matches every error of its kind.
var (
	// ErrSessionNotFound: no stored session has that id.
	ErrSessionNotFound = &Error{Kind: KindSessionNotFound, Msg: "session not found"}
	// ErrSessionNotLive: a turn method without a live provider child.
	ErrSessionNotLive = &Error{Kind: KindSessionNotLive, Msg: "session not live: hold it first"}
	// ErrSessionOwned: the lease is held by a live process this daemon does not own.
	ErrSessionOwned = &Error{Kind: KindSessionOwned, Msg: "session owned by another process"}
	// ErrStaleFence: an operation named a fence older than the lease's.
	ErrStaleFence = &Error{Kind: KindStaleFence, Msg: "stale fence"}
	// ErrEvictionFailed: a teardown step failed.
	ErrEvictionFailed = &Error{Kind: KindEvictionFailed, Msg: "eviction failed"}
	// ErrExitUnproven: the provider root could not be proven exited.
	ErrExitUnproven = &Error{Kind: KindExitUnproven, Msg: "provider exit unproven"}
	// ErrProviderFailed: spawn or handshake failed, or the child exited while starting.
	ErrProviderFailed = &Error{Kind: KindProviderFailed, Msg: "provider failed"}
	// ErrTurnRunning: send while a turn runs.
	ErrTurnRunning = &Error{Kind: KindTurnRunning, Msg: "a turn is running"}
	// ErrInvalidState: the operation does not fit the session's state.
	ErrInvalidState = &Error{Kind: KindInvalidState, Msg: "invalid state"}
	// ErrLimitExceeded: a per-connection limit was reached.
	ErrLimitExceeded = &Error{Kind: KindLimitExceeded, Msg: "limit exceeded"}
	// ErrUnknownProvider: the provider is not in the config.
	ErrUnknownProvider = &Error{Kind: KindUnknownProvider, Msg: "unknown provider"}
	// ErrCursorAhead: afterSeq is beyond the journal's end.
	ErrCursorAhead = &Error{Kind: KindCursorAhead, Msg: "cursor ahead of journal"}
	// ErrCursorCompacted: events before oldestSeq were dropped by retention.
	ErrCursorCompacted = &Error{Kind: KindCursorCompacted, Msg: "cursor compacted"}
	// ErrRequestNotFound: respond names no pending approval.
	ErrRequestNotFound = &Error{Kind: KindRequestNotFound, Msg: "request not found"}
	// ErrUpgradeRefused: daemon.upgrade could not start (data.cause); the daemon carries on.
	ErrUpgradeRefused = &Error{Kind: KindUpgradeRefused, Msg: "upgrade refused"}
	// ErrSessionDamaged: the session's stored record or lease no longer
	// decodes (damaged on disk); data.cause, data.fix (delete it).
	ErrSessionDamaged = &Error{Kind: KindSessionDamaged, Msg: "session damaged"}
	// ErrStoreUnavailable: the store cannot be written (disk full, an I/O
	// error): data.cause; nothing acknowledged is lost, the call changed
	// nothing.
	ErrStoreUnavailable = &Error{Kind: KindStoreUnavailable, Msg: "store unavailable"}
	// ErrInvalidParams: a missing or ill-typed field.
	ErrInvalidParams = &Error{Kind: KindInvalidParams, Msg: "invalid params"}
)

// ErrLagged ends a Subscription whose queue overflowed.
var ErrLagged = errors.New("subscriber lagged")

// ErrSubscriptionClosed ends a Subscription that was detached or shut down.
var ErrSubscriptionClosed = errors.New("subscription closed")
