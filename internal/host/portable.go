package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/store"
)

// The portable history: when an account switch could not carry the
// thread itself (the leaving account holds no copy, the profile has no
// Mover, or the joining account answered the typed not-found), the
// session gets a fresh thread and its next turn carries the session's
// completed history from the journal ahead of its own text: each turn
// that ended completed, its user text and its final assistant text,
// oldest first, at most Options.PortableHistoryBytes (oldest dropped
// first). Turns that never started, were refused, failed or were
// interrupted are not replayed. The journal's turn ids and order are
// untouched: the history goes to the provider, turn.started keeps the
// user's own text.

// portableTurn is one completed turn of the history.
type portableTurn struct{ user, assistant string }

// Markers around the history in the first turn of a fresh thread.
const (
	portableHead = "[Earlier conversation of this session, carried over from another account; oldest first]\n"
	portableTail = "[End of the earlier conversation]\n\n"
)

// portableHistory is the text the next turn of session id carries ahead
// of its own ("" when no turn completed).
func (h *Host) portableHistory(id string) (string, error) {
	turns, err := h.completedTurns(id)
	if err != nil {
		return "", err
	}
	return formatHistory(turns, h.o.PortableHistoryBytes), nil
}

// formatHistory writes turns, dropping the oldest until the whole fits
// in limit bytes.
func formatHistory(turns []portableTurn, limit int) string {
	parts := make([]string, len(turns))
	size := len(portableHead) + len(portableTail)
	for i, t := range turns {
		parts[i] = "User: " + t.user + "\nAssistant: " + t.assistant + "\n"
		size += len(parts[i])
	}
	first := 0
	for first < len(parts) && size > limit {
		size -= len(parts[first])
		first++
	}
	if first == len(parts) {
		return ""
	}
	return portableHead + strings.Join(parts[first:], "") + portableTail
}

// completedTurns reads the session's journal (what retention kept) for
// its completed turns, in order.
func (h *Host) completedTurns(id string) ([]portableTurn, error) {
	type open struct {
		user string
		last string // the last message.completed text
	}
	var out []portableTurn
	turns := map[string]*open{}
	var after uint64
	for {
		evs, _, more, err := h.j.Read(id, after, 512)
		var ce *journal.CursorError
		if errors.As(err, &ce) && errors.Is(err, journal.ErrCursorCompacted) && ce.OldestSeq > 0 {
			after = ce.OldestSeq - 1
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read journal: %w", err)
		}
		for _, ev := range evs {
			after = ev.Seq
			switch ev.Type {
			case event.TurnStarted:
				var d event.TurnStartedData
				if json.Unmarshal(ev.Data, &d) == nil {
					turns[ev.TurnID] = &open{user: d.Text}
				}
			case event.MessageCompleted:
				var d event.DeltaData
				if t := turns[ev.TurnID]; t != nil && json.Unmarshal(ev.Data, &d) == nil {
					t.last = d.Text
				}
			case event.TurnCompleted:
				var d event.TurnCompletedData
				t := turns[ev.TurnID]
				delete(turns, ev.TurnID)
				if t != nil && json.Unmarshal(ev.Data, &d) == nil && d.Status == event.StatusCompleted {
					out = append(out, portableTurn{user: t.user, assistant: t.last})
				}
			}
		}
		if !more || len(evs) == 0 {
			return out, nil
		}
	}
}

// portableSent records that the history went out with a turn: the next
// ones carry only their own text. Needs the session lock.
func (h *Host) portableSent(e *entry) {
	if err := h.st.UpdateRecord(e.id, func(r *store.Record) { r.Portable = false }); err != nil {
		h.log.Error("record portable history sent", "session_id", e.id, "err", err)
		return
	}
	e.rec.Portable = false
}
