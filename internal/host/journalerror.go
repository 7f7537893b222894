package host

import (
	"errors"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/journal"
)

// journalError translates the journal's refusals into the wire's kinds:
// the one place journal errors become api kinds. The message is the
// journal's (once: the cause is not chained behind it). Anything else (a storage
// fault) passes through as an internal error.
func journalError(err error) error {
	var ce *journal.CursorError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce) && errors.Is(err, journal.ErrCursorAhead):
		return &api.Error{Kind: api.KindCursorAhead, Msg: ce.Error(), Data: map[string]any{"lastSeq": ce.LastSeq}}
	case errors.As(err, &ce) && errors.Is(err, journal.ErrCursorCompacted):
		return &api.Error{Kind: api.KindCursorCompacted, Msg: ce.Error(), Data: map[string]any{"oldestSeq": ce.OldestSeq}}
	case errors.Is(err, journal.ErrLagged):
		return api.ErrLagged
	case errors.Is(err, journal.ErrSubscriptionClosed):
		return api.ErrSubscriptionClosed
	}
	return err
}
