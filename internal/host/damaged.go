package host

import (
	"errors"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/store"
)

// maxCause bounds the store's decode error repeated in data.cause.
const maxCause = 512

// isDamaged reports a stored record or lease of a session that no longer
// decodes (damaged on disk).
func isDamaged(err error) bool {
	return errors.Is(err, store.ErrDamaged) || errors.Is(err, lease.ErrBadRecord)
}

// damagedError is session_damaged for a session whose record or lease no
// longer decodes: it names the damage and ctl doctor's fix (delete the
// session, which works on a damaged one), never internal_error.
func damagedError(id string, err error) error {
	what := "record"
	if errors.Is(err, lease.ErrBadRecord) {
		what = "lease"
	}
	cause := err.Error()
	if len(cause) > maxCause {
		cause = cause[:maxCause] + "…"
	}
	fix := "sessiond ctl delete " + id
	return &api.Error{Kind: api.KindSessionDamaged,
		Msg: "session " + id + " is damaged; fix: " + fix + " (or restore sessiond.db from a backup)",
		Err: err, Data: map[string]any{"sessionId": id, "damaged": what, "cause": cause, "fix": fix}}
}
