package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/internal/event"
)

// Respond answers the pending approval requestID and emits
// approval.resolved. An unknown (or already answered, or withdrawn) id is
// ErrRequestNotFound; a decision the request's options do not list is a
// *DecisionError and leaves the approval pending. The write is not bounded
// by ctx: a provider that stopped reading its stdin is ended by the close
// ladder, which unblocks it.
func (a *Adapter) Respond(_ context.Context, requestID string, ans Answer) error {
	a.mu.Lock()
	ap, ok := a.approvals[requestID]
	if ok && !slices.Contains(ap.options, ans.Decision) {
		a.mu.Unlock()
		return fmt.Errorf("request %s: %w", requestID, &DecisionError{Decision: ans.Decision, Allowed: slices.Clone(ap.options)})
	}
	delete(a.approvals, requestID)
	if ok && ans.Decision == DecisionCancel && a.turn != nil && a.turn.ours == ap.turnID {
		a.turn.interrupted = true // the provider ends the turn: the user's cancel
	}
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("request %s: %w", requestID, ErrRequestNotFound)
	}
	// Emit before writing: whatever the provider sends in reaction to the
	// answer (turn/completed) is then necessarily emitted after it, and no
	// lock is held across a write that a stalled provider could block.
	// A failed write means the provider is gone; the turn ends with it.
	a.emit(event.New(event.ApprovalResolved, ap.turnID, event.ApprovalResolvedData{RequestID: requestID, Decision: ans.Decision, Origin: ans.Origin}))
	if err := a.write(outResult{ID: ap.rawID, Result: wireAnswer(ap, ans)}); err != nil {
		return fmt.Errorf("request %s: %w", requestID, err)
	}
	return nil
}

// wireAnswer is the provider's response to ap for ans (codex v2 shapes).
func wireAnswer(ap *approval, ans Answer) any {
	switch ap.kind {
	case "permissions":
		if ans.Decision == DecisionDeny {
			return map[string]any{"permissions": map[string]any{}} // the empty grant
		}
		var p struct {
			Permissions json.RawMessage `json:"permissions"`
		}
		_ = json.Unmarshal(ap.params, &p)
		grant := json.RawMessage(`{}`)
		if len(p.Permissions) > 0 && string(p.Permissions) != "null" {
			grant = p.Permissions
		}
		scope := "turn"
		if ans.Decision == DecisionApproveForSession {
			scope = "session"
		}
		return map[string]any{"permissions": grant, "scope": scope}
	case "userInput":
		answers := map[string]any{}
		if ans.Decision == DecisionApprove {
			for q, v := range ans.Answers {
				answers[q] = map[string]any{"answers": nonNil(v)}
			}
		}
		return map[string]any{"answers": answers}
	case "elicitation":
		r := map[string]any{"action": map[string]string{
			DecisionApprove: "accept", DecisionDeny: "decline", DecisionCancel: "cancel"}[ans.Decision]}
		if ans.Decision == DecisionApprove && len(ans.Content) > 0 {
			r["content"] = ans.Content
		}
		return r
	}
	return map[string]any{"decision": map[string]string{
		DecisionApprove: "accept", DecisionApproveForSession: "acceptForSession",
		DecisionDeny: "decline", DecisionCancel: "cancel"}[ans.Decision]}
}
