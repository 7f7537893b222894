package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// readLoop reads the provider's stdout line by line until EOF, a read error
// or Drain, handling each line in order; Done closes after the last one.
func (a *Adapter) readLoop() {
	defer close(a.done)
	lr := newLineReader(a.out, a.o.MaxLineBytes)
	for {
		line, err := lr.Next()
		if errors.Is(err, errLineTooLong) {
			// Dropped output is never silent: the journal says so too.
			a.anomaly("line_too_long", "max_bytes", a.o.MaxLineBytes)
			a.notice("warning", "line_too_long",
				fmt.Sprintf("the provider wrote a line over %d bytes; it was dropped", a.o.MaxLineBytes))
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && a.parkIfPaused(lr.Unparsed()) {
			continue // resumed: the deadline is cleared, the cut line goes on
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
				a.log.Warn("read provider stdout", "err", err)
			}
			a.closeOpenItems()
			return
		}
		a.handleLine(line)
	}
}

func (a *Adapter) handleLine(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m message
	if ok, bad := provider.Decode(line, &m); !ok || bad != nil && bad.Field == "method" {
		// (a method that is no string names nothing the adapter could serve)
		a.anomaly("unparseable_line", "line", truncate(line, 120))
		return
	} else if bad != nil {
		a.anomaly("bad_field", "field", truncate([]byte(bad.Field), 60), "value", bad.Value)
	}
	switch {
	case m.Method != "" && m.hasID():
		a.handleServerRequest(&m)
	case m.Method != "":
		a.handleNotification(&m)
	case m.hasID():
		a.handleResponse(&m)
	default:
		a.anomaly("message_without_method_or_id", "line", truncate(line, 120))
	}
}

// resolveTurn maps a provider turn id to the open turn, binding it when the
// open turn has none yet. ok is false for anything but the open turn.
func (a *Adapter) resolveTurn(threadID, providerTurnID string) (openTurn, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.turn
	if threadID != "" && a.threadID != "" && threadID != a.threadID {
		a.anomalyLocked("other_thread", "method", a.reading)
		return openTurn{}, false
	}
	if providerTurnID != "" && providerTurnID == a.lastEnded {
		// a late line of the turn that ended here: it must not end (or
		// bind to) the next turn.
		return openTurn{}, false
	}
	if t == nil || (t.provider != "" && providerTurnID != "" && providerTurnID != t.provider) {
		a.anomalyLocked("event_outside_open_turn", "method", a.reading)
		return openTurn{}, false
	}
	if t.provider == "" {
		t.provider = providerTurnID
	}
	return *t, true
}

// completeTurn closes the open turn and emits turn.completed.
func (a *Adapter) completeTurn(threadID, providerTurnID, status, errText string, limited bool) {
	t, ok := a.resolveTurn(threadID, providerTurnID)
	if !ok {
		return
	}
	a.mu.Lock()
	a.turn = nil
	a.lastEnded = t.provider
	open := a.takeApprovalsLocked(t.ours)
	items := a.items.takeOpen()
	a.items.reset()
	resetsAt := a.limitResetsAtLocked(time.Now())
	a.mu.Unlock()
	// An approval the provider never saw answered is closed in the journal
	// before the turn ends: nobody can answer it any more. So is an item
	// the provider started and never completed.
	for _, k := range open {
		a.emit(event.New(event.ApprovalResolved, t.ours, event.ApprovalResolvedData{
			RequestID: k, Decision: "cancel", By: "daemon", Reason: "turn_ended"}))
	}
	for _, d := range items {
		a.emit(event.New(event.ItemCompleted, t.ours, d))
	}
	d := event.TurnCompletedData{Status: status, ProviderTurnID: t.provider}
	switch status {
	case event.StatusCompleted:
	case event.StatusInterrupted:
		if t.interrupted {
			d.Reason = event.ReasonUserCancel
		}
	default:
		if errText == "" {
			errText = t.failure // the final `error` before turn/completed
		}
		d.Status, d.Reason, d.Error = event.StatusFailed, event.ReasonProviderError, errText
		if status != event.StatusFailed && errText == "" {
			d.Error = "unknown turn status " + status
		}
		if status == event.StatusFailed && (limited || t.limited) {
			d.Reason, d.ResetsAt = event.ReasonRateLimited, resetsAt
		}
	}
	a.emit(event.New(event.TurnCompleted, t.ours, d))
}

// errorText extracts a message from an error value: a string, an object
// with "message", or the raw JSON.
func errorText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	return truncate(raw, 500)
}

// closeOpenItems: the provider's output ended with a turn open (it exited
// or is being stopped; the host completes the turn): every item it started
// and never completed is completed interrupted first.
func (a *Adapter) closeOpenItems() {
	a.mu.Lock()
	var turnID string
	if a.turn != nil {
		turnID = a.turn.ours
	}
	items := a.items.takeOpen()
	a.mu.Unlock()
	if turnID == "" {
		return
	}
	for _, d := range items {
		a.emit(event.New(event.ItemCompleted, turnID, d))
	}
}
