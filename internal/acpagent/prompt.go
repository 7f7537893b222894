package acpagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

type promptParams struct {
	SessionID string            `json:"sessionId"`
	Prompt    []json.RawMessage `json:"prompt"`
}

// promptText is the prompt's text: text blocks as they are, a resource
// link by its uri, an embedded text resource by its text.
func promptText(blocks []json.RawMessage) string {
	var parts []string
	for _, raw := range blocks {
		var c struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			URI      string `json:"uri"`
			Resource struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			} `json:"resource"`
		}
		if json.Unmarshal(raw, &c) != nil {
			continue
		}
		switch c.Type {
		case "text":
			parts = append(parts, c.Text)
		case "resource_link":
			parts = append(parts, c.URI)
		case "resource":
			if c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else {
				parts = append(parts, c.Resource.URI)
			}
		}
	}
	return strings.Join(parts, "\n")
}

func (b *bridge) prompt(ctx context.Context, params json.RawMessage) (any, *wireError) {
	var p promptParams
	if err := json.Unmarshal(params, &p); err != nil || p.SessionID == "" {
		return nil, &wireError{Code: codeInvalidParams, Message: "session/prompt needs sessionId and prompt"}
	}
	s := b.lookup(p.SessionID)
	if s == nil {
		return nil, unknownSession(p.SessionID)
	}
	text := promptText(p.Prompt)
	if len(text) > maxPrompt {
		return nil, &wireError{Code: codeInvalidParams,
			Message: fmt.Sprintf("prompt of %d bytes is over the bridge's bound of %d bytes", len(text), maxPrompt)}
	}
	var idb [12]byte
	rand.Read(idb[:])
	w := &promptWait{cmid: "acp-" + hex.EncodeToString(idb[:]), result: make(chan turnEnd, 1)}
	s.mu.Lock()
	if s.prompt != nil {
		s.mu.Unlock()
		return nil, &wireError{Code: codeInvalidRequest, Message: "a prompt is already running in session " + s.id + " (session/cancel it first)"}
	}
	s.prompt = w
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.prompt == w {
			s.prompt = nil
		}
		s.mu.Unlock()
	}()
	// A connection lost under the send is retried on the next one with the
	// same clientMessageId: the daemon sends it once (duplicate otherwise).
	var r api.SendResult
	for try := 0; ; try++ {
		err := b.call(ctx, "agentSession.send", api.SendParams{SessionID: s.id, Text: text, ClientMessageID: w.cmid}, &r)
		if err == nil {
			break
		}
		if !lostConn(err) || try == 2 {
			return nil, fromDaemon(err)
		}
	}
	s.mu.Lock()
	if w.turnID == "" {
		w.turnID = r.TurnID
	}
	s.ours[r.TurnID] = true
	s.mu.Unlock()
	select {
	case end := <-w.result:
		if end.err != nil {
			return nil, end.err
		}
		return map[string]any{"stopReason": end.stop}, nil
	case <-b.d.dead:
		return nil, daemonGone(b.d.err)
	case <-ctx.Done():
		select {
		case <-b.d.dead:
			return nil, daemonGone(b.d.err)
		default:
		}
		return nil, &wireError{Code: codeInternal, Message: "the bridge is closing; the turn goes on in the daemon"}
	case <-s.done:
		return map[string]any{"stopReason": "cancelled"}, nil
	}
	// A daemon connection lost meanwhile is replaced (start.go): the
	// catch-up from the journal brings the turn's end, whatever it was.
}

// daemonGone answers a prompt the daemon's loss ended.
func daemonGone(err error) *wireError {
	return &wireError{Code: codeInternal, Message: err.Error() + "; the turn's end is in the daemon's journal (session/load it from a new bridge)",
		Data: map[string]any{"reason": "daemon_unreachable"}}
}

// stopReason maps a turn.completed onto ACP: completed is end_turn (or
// the ACP provider's own stopReason), interrupted is cancelled, failed is
// an error naming why.
func stopReason(d event.TurnCompletedData) turnEnd {
	switch d.Status {
	case event.StatusCompleted:
		switch d.StopReason {
		case "end_turn", "max_tokens", "max_turn_requests", "refusal":
			return turnEnd{stop: d.StopReason}
		}
		return turnEnd{stop: "end_turn"}
	case event.StatusInterrupted:
		if d.Reason == event.ReasonApprovalDenied {
			return turnEnd{stop: "end_turn"}
		}
		return turnEnd{stop: "cancelled"}
	}
	msg := "the turn failed"
	if d.Reason != "" {
		msg += " (" + d.Reason + ")"
	}
	if d.Error != "" {
		msg += ": " + d.Error
	}
	return turnEnd{err: &wireError{Code: codeInternal, Message: msg, Data: map[string]any{"status": d.Status, "reason": d.Reason}}}
}

// turnEvent resolves the running prompt on its turn's start and end.
func (s *session) turnEvent(ev event.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.prompt
	if w == nil {
		return
	}
	switch ev.Type {
	case event.TurnStarted:
		var d event.TurnStartedData
		if json.Unmarshal(ev.Data, &d) == nil && d.ClientMessageID == w.cmid {
			w.turnID = ev.TurnID
			if w.turnID == "" {
				w.turnID = d.TurnID
			}
			s.ours[w.turnID] = true
		}
	case event.TurnCompleted:
		if w.turnID == "" || ev.TurnID != w.turnID {
			return
		}
		var d event.TurnCompletedData
		json.Unmarshal(ev.Data, &d)
		select {
		case w.result <- stopReason(d):
		default:
		}
	}
}
