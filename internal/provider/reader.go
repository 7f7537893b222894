package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/sessiond/sessiond/internal/event"
)

// readLoop reads the provider's stdout line by line until EOF, a read error
// or Drain, handling each line in order; Done closes after the last one.
func (a *Adapter) readLoop() {
	defer close(a.done)
	lr := newLineReader(a.out, a.o.MaxLineBytes)
	for {
		line, err := lr.next()
		if errors.Is(err, errLineTooLong) {
			a.anomaly("line_too_long", "max_bytes", a.o.MaxLineBytes)
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
				a.log.Warn("read provider stdout", "err", err)
			}
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
	if err := json.Unmarshal(line, &m); err != nil {
		a.anomaly("unparseable_line", "err", err, "line", truncate(line, 120))
		return
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

// note is the union of the notification params the adapter reads.
type note struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	Delta    string `json:"delta"`
	Item     *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"item"`
	Turn *struct {
		ID     string          `json:"id"`
		Status string          `json:"status"`
		Error  json.RawMessage `json:"error"`
	} `json:"turn"`
	Error     json.RawMessage `json:"error"`
	WillRetry bool            `json:"willRetry"`
}

func (a *Adapter) handleNotification(m *message) {
	var n note
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &n); err != nil {
			a.anomaly("bad_params", "method", m.Method, "err", err)
			return
		}
	}
	switch m.Method {
	case "turn/started":
		if n.Turn != nil {
			a.resolveTurn(n.ThreadID, n.Turn.ID)
		}
	case "item/agentMessage/delta":
		if t, ok := a.resolveTurn(n.ThreadID, n.TurnID); ok {
			a.emit(event.New(event.MessageDelta, t.ours, event.DeltaData{Text: n.Delta, ProviderTurnID: t.provider}))
		}
	case "item/completed":
		if n.Item == nil || n.Item.Type != "agentMessage" {
			return
		}
		if t, ok := a.resolveTurn(n.ThreadID, n.TurnID); ok {
			a.emit(event.New(event.MessageCompleted, t.ours, event.DeltaData{Text: n.Item.Text, ProviderTurnID: t.provider}))
		}
	case "turn/completed":
		if n.Turn == nil {
			a.anomaly("turn_completed_without_turn")
			return
		}
		a.completeTurn(n.ThreadID, n.Turn.ID, n.Turn.Status, errorText(n.Turn.Error))
	case "error":
		if n.WillRetry {
			a.log.Info("provider error, retrying", "err", errorText(n.Error))
			return
		}
		a.completeTurn(n.ThreadID, n.TurnID, event.StatusFailed, errorText(n.Error))
	case "initialized", "thread/started", "thread/status/changed", "item/started":
	default:
		a.anomaly("unknown_notification", "method", m.Method)
	}
}

// resolveTurn maps a provider turn id to the open turn, binding it when the
// open turn has none yet. ok is false for anything but the open turn.
func (a *Adapter) resolveTurn(threadID, providerTurnID string) (openTurn, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.turn
	if threadID != "" && a.threadID != "" && threadID != a.threadID {
		a.anomalyLocked("other_thread")
		return openTurn{}, false
	}
	if t == nil || (t.provider != "" && providerTurnID != "" && providerTurnID != t.provider) {
		a.anomalyLocked("event_outside_open_turn")
		return openTurn{}, false
	}
	if t.provider == "" {
		t.provider = providerTurnID
	}
	return *t, true
}

// completeTurn closes the open turn and emits turn.completed.
func (a *Adapter) completeTurn(threadID, providerTurnID, status, errText string) {
	t, ok := a.resolveTurn(threadID, providerTurnID)
	if !ok {
		return
	}
	a.mu.Lock()
	a.turn = nil
	for k, ap := range a.approvals {
		if ap.turnID == t.ours {
			delete(a.approvals, k)
		}
	}
	a.mu.Unlock()
	d := event.TurnCompletedData{Status: status, ProviderTurnID: t.provider}
	switch status {
	case event.StatusCompleted:
	case event.StatusInterrupted:
		if t.interrupted {
			d.Reason = event.ReasonUserCancel
		}
	default:
		d.Status, d.Reason, d.Error = event.StatusFailed, event.ReasonProviderError, errText
		if status != event.StatusFailed && errText == "" {
			d.Error = "unknown turn status " + status
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

// approvalKinds maps server request methods to approval.requested kinds.
var approvalKinds = map[string]string{
	"item/commandExecution/requestApproval": "commandExecution",
	"item/fileChange/requestApproval":       "fileChange",
}

func (a *Adapter) handleServerRequest(m *message) {
	kind, ok := approvalKinds[m.Method]
	if !ok {
		a.anomaly("unknown_request", "method", m.Method)
		err := a.write(outError{ID: m.ID, Error: RPCError{Code: codeMethodNotFound, Message: "method not found: " + m.Method}})
		if err != nil {
			a.log.Warn("answer unknown request", "method", m.Method, "err", err)
		}
		return
	}
	var n note
	_ = json.Unmarshal(m.Params, &n)
	key := idKey(m.ID)
	a.mu.Lock()
	turnID := ""
	if a.turn != nil {
		turnID = a.turn.ours
	}
	if _, dup := a.approvals[key]; dup {
		a.anomalyLocked("duplicate_request_id")
	}
	a.approvals[key] = &approval{rawID: append([]byte(nil), m.ID...), turnID: turnID}
	a.mu.Unlock()
	a.emit(event.New(event.ApprovalRequested, turnID, event.ApprovalRequestedData{
		RequestID: key, Kind: kind, Detail: append(json.RawMessage(nil), m.Params...),
	}))
}
