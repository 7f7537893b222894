package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// readLoop reads the agent's stdout line by line until EOF, a read error
// or Drain, handling each line in order; Done closes after the last one.
func (a *Adapter) readLoop() {
	defer a.finish()
	lr := provider.NewLineReader(a.out, a.o.MaxLineBytes)
	for {
		line, err := lr.Next()
		if errors.Is(err, provider.ErrLineTooLong) {
			a.anomaly("line_too_long", "max_bytes", a.o.MaxLineBytes)
			a.noticeOnce("line_too_long", "warning", "line_too_long",
				fmt.Sprintf("the agent wrote a line over %d bytes; it was dropped (and any later one)", a.o.MaxLineBytes))
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
	if ok, bad := provider.Decode(line, &m); !ok || len(line) == 0 || line[0] != '{' || bad != nil && bad.Field == "method" {
		// Agents print banners and log lines to stdout: skipped, counted,
		// logged once (later ones at debug).
		a.mu.Lock()
		a.garbage++
		n := a.garbage
		a.mu.Unlock()
		a.anomaly("garbage_line", "line", capText(string(line), 120), "count", n)
		return
	} else if bad != nil {
		a.anomaly("bad_field", "field", capText(bad.Field, 60), "value", bad.Value)
	}
	switch {
	case m.Method != "" && m.hasID() && len(m.ID) > maxAgentIDBytes:
		a.refuseLongID(&m)
	case m.Method != "" && m.hasID():
		a.handleAgentRequest(&m)
	case m.Method != "":
		a.handleNotification(&m)
	case m.hasID():
		a.handleResponse(&m)
	default:
		a.anomaly("message_without_method_or_id", "line", capText(string(line), 120))
	}
}

// maxAgentIDBytes bounds an agent's request id (its JSON text): our answer
// echoes it and a pending permission keeps it, so it is held for the agent.
const maxAgentIDBytes = 1024

// refuseLongID answers a request whose id is over maxAgentIDBytes with
// invalid-request naming the size and the limit (echoing the id: the only
// way the agent can match the answer), logged and journaled once; nothing
// of it is kept.
func (a *Adapter) refuseLongID(m *message) {
	name := agentName(m.Method)
	a.anomaly("request_id_too_long", "method", name, "id_bytes", len(m.ID), "max_bytes", maxAgentIDBytes)
	msg := fmt.Sprintf("request id of %d bytes (method %s) is over %d bytes", len(m.ID), name, maxAgentIDBytes)
	a.noticeOnce("request_id_too_long", "warning", "request_id_too_long", "the agent's request was refused: "+msg)
	a.respondErrorAsync(m.ID, codeInvalidRequest, msg)
}

// Garbage is how many lines the agent wrote that were no JSON-RPC message.
func (a *Adapter) Garbage() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.garbage
}

// handleAgentRequest: session/request_permission is relayed; every other
// client method (fs/*, terminal/*, an agent's own extensions) is answered
// -32601 at once, logged and journaled once per method.
func (a *Adapter) handleAgentRequest(m *message) {
	if m.Method == "session/request_permission" {
		a.onPermission(m)
		return
	}
	name := agentName(m.Method)
	a.anomaly("unserved_method:"+name, "method", name)
	a.noticeOnce("method:"+name, "info", "unserved_method",
		"the agent called "+name+", which sessiond does not serve; it was answered method-not-found")
	a.respondErrorAsync(m.ID, codeMethodNotFound, "sessiond does not serve "+name)
}

// handleNotification: session/update by kind (tables.go); $/cancel_request
// withdraws a permission request; anything else is a notice once.
func (a *Adapter) handleNotification(m *message) {
	switch m.Method {
	case "session/update":
		a.onUpdate(m.Params)
	case "$/cancel_request":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		a.onWithdrawn(p.RequestID)
	default:
		name := agentName(m.Method)
		a.anomaly("unknown_notification", "method", name)
		a.noticeOnce("notification:"+name, "info", "unknown_notification", "the agent sent an unknown notification "+name)
	}
}

// closeOpenItems: the agent's output ended with a turn open (it exited or
// is being stopped; the host completes the turn): every item it started
// and never completed is completed interrupted first.
func (a *Adapter) closeOpenItems() {
	a.mu.Lock()
	t := a.turn
	var ds []event.Draft
	if t != nil {
		ds = a.closeItemsLocked(t)
	}
	a.mu.Unlock()
	for _, d := range ds {
		a.emit(d)
	}
}
