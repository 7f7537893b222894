package acpagent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// permissionOption is the ACP option of a sessiond decision.
func permissionOption(decision string) (map[string]any, bool) {
	switch decision {
	case "approve":
		return map[string]any{"optionId": decision, "name": "Allow", "kind": "allow_once"}, true
	case "approveForSession":
		return map[string]any{"optionId": decision, "name": "Allow for this session", "kind": "allow_always"}, true
	case "deny":
		return map[string]any{"optionId": decision, "name": "Reject", "kind": "reject_once"}, true
	}
	return nil, false
}

// ask puts an approval to the editor as session/request_permission, in its
// own goroutine once written (the editor may take its time; events go on), and answers
// the daemon with the chosen decision; a cancelled outcome is cancel.
func (b *bridge) ask(ctx context.Context, s *session, ev event.Event) {
	var d event.ApprovalRequestedData
	if json.Unmarshal(ev.Data, &d) != nil || d.RequestID == "" {
		return
	}
	s.mu.Lock()
	if s.asked[d.RequestID] {
		s.mu.Unlock()
		return
	}
	s.asked[d.RequestID] = true
	s.mu.Unlock()
	decisions := d.Options
	if len(decisions) == 0 {
		decisions = []string{"approve", "deny"}
	}
	var options []map[string]any
	for _, dec := range decisions {
		if o, ok := permissionOption(dec); ok {
			options = append(options, o)
		}
	}
	toolCallID := d.ItemID
	if toolCallID == "" {
		toolCallID = d.RequestID
	}
	kind := map[string]string{"command": "execute", "fileChange": "edit"}[d.Kind]
	if kind == "" {
		kind = "other"
	}
	tc := map[string]any{"toolCallId": toolCallID, "kind": kind, "title": "sessiond asks: " + d.Kind}
	if len(d.Detail) > 0 {
		tc["rawInput"] = d.Detail
	}
	params := map[string]any{"sessionId": s.id, "toolCall": tc, "options": options}
	wait := b.request("session/request_permission", params) // written now: on load, before load's answer
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		res, err := wait(ctx)
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintln(b.stderr, "sessiond acp: request_permission:", err)
			}
			return // the approval stays open in the daemon: a later load asks again
		}
		var r struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		decision := "cancel"
		if json.Unmarshal(res, &r) == nil && r.Outcome.Outcome == "selected" {
			decision = r.Outcome.OptionID
		}
		if err := b.call(ctx, "agentSession.respond", api.RespondParams{SessionID: s.id, RequestID: d.RequestID, Decision: decision}, nil); err != nil {
			fmt.Fprintln(b.stderr, "sessiond acp: respond:", err)
		}
	}()
}
