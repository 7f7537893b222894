package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// approval is a can_use_tool request waiting for Respond.
type approval struct {
	rawID       json.RawMessage // the CLI's request_id as sent (the key is RequestIDPrefix + provider.RequestKey of it)
	turnID      string
	kind        string
	options     []string
	toolName    string
	toolUseID   string
	input       json.RawMessage
	suggestions []json.RawMessage
	order       int64
}

var (
	optionsTool  = []string{provider.DecisionApprove, provider.DecisionApproveForSession, provider.DecisionDeny, provider.DecisionCancel}
	optionsInput = []string{provider.DecisionApprove, provider.DecisionDeny, provider.DecisionCancel}
)

// approvalKind is approval.requested's kind for a tool.
func approvalKind(tool string) string {
	switch tool {
	case "Bash":
		return "command"
	case "Edit", "Write", "NotebookEdit", "MultiEdit":
		return "fileChange"
	case "AskUserQuestion":
		return "userInput"
	}
	return "toolCall"
}

// onControlRequest: can_use_tool is relayed as approval.requested; any
// other subtype is answered at once with an error (the CLI never waits on
// a request nobody serves) and journaled as resolved by the daemon.
func (a *Adapter) onControlRequest(m *inbound) {
	var req struct {
		Subtype     string            `json:"subtype"`
		ToolName    string            `json:"tool_name"`
		Input       json.RawMessage   `json:"input"`
		Suggestions []json.RawMessage `json:"permission_suggestions"`
		ToolUseID   string            `json:"tool_use_id"`
	}
	// The id clients see is unique per child: a restarted CLI may reuse a
	// request_id, and an answer meant for the earlier (cancelled) request
	// must never reach the new one.
	id, ok := provider.RequestKey(m.RequestID)
	if !ok {
		a.anomaly("bad_request_id", "request_id", capText(string(m.RequestID), 40))
		return // no answer could name it
	}
	key := a.o.RequestIDPrefix + id
	a.decode("control_request", m.Request, &req)
	t := a.turnID()
	a.mu.Lock()
	_, dup := a.approvals[key]
	a.mu.Unlock()
	switch {
	case dup: // the open one stays open and answerable; this one is refused
		a.refuseDuplicate(m.RequestID, key)
		return
	case req.Subtype != "can_use_tool":
		reason := "sessiond does not serve control request " + capText(req.Subtype, 60)
		a.anomaly("unserved_control_request", "subtype", capText(req.Subtype, 60))
		a.emit(event.New(event.ApprovalResolved, t, event.ApprovalResolvedData{
			RequestID: key, Decision: provider.DecisionDeny, By: "daemon", Reason: reason}))
		if err := a.respondError(m.RequestID, reason); err != nil {
			a.log.Warn("answer provider control request", "subtype", capText(req.Subtype, 60), "err", err)
		}
		return
	}
	if t == "" {
		// Claude asks only while a query runs: relayed without a turn
		// (whatever turn comes next is not its), open until answered.
		a.anomaly("approval_outside_turn", "request_id", capText(key, 60))
	}
	kind := approvalKind(req.ToolName)
	opts := optionsTool
	if kind == "userInput" {
		opts = optionsInput
	}
	a.mu.Lock()
	a.approvalN++
	a.approvals[key] = &approval{rawID: m.RequestID, turnID: t, kind: kind, options: opts, toolName: req.ToolName,
		toolUseID: req.ToolUseID, input: req.Input, suggestions: req.Suggestions, order: a.approvalN}
	a.mu.Unlock()
	a.emit(event.New(event.ApprovalRequested, t, event.ApprovalRequestedData{
		RequestID: key, Kind: kind, ItemID: req.ToolUseID, Detail: rawOf(m.Request), Options: opts}))
}

// refuseDuplicate answers a request whose request_id is that of an open
// one with an error; the journal gets one notice per child (never an
// approval.resolved under the open one's requestId).
func (a *Adapter) refuseDuplicate(rawID json.RawMessage, key string) {
	a.anomaly("duplicate_request_id", "request_id", capText(key, 60))
	a.noticeOnce("duplicate_request_id", "warning", "duplicate_request_id",
		"provider sent a control request with the request_id of one still open ("+capText(key, 60)+"); it was refused")
	if err := a.respondError(rawID, "a request with this request_id is already open"); err != nil {
		a.log.Warn("answer provider control request", "err", err)
	}
}

// onControlCancel: the CLI withdrew a request nobody answered.
func (a *Adapter) onControlCancel(m *inbound) {
	id, ok := provider.RequestKey(m.RequestID)
	if !ok {
		a.anomaly("bad_request_id", "request_id", capText(string(m.RequestID), 40))
		return
	}
	key := a.o.RequestIDPrefix + id
	a.mu.Lock()
	ap, open := a.approvals[key]
	delete(a.approvals, key)
	a.mu.Unlock()
	if open {
		a.emit(event.New(event.ApprovalResolved, ap.turnID, event.ApprovalResolvedData{
			RequestID: key, Decision: "cancel", By: "provider", Reason: "withdrawn"}))
	}
}

// Respond answers the pending can_use_tool requestID with a
// control_response and emits approval.resolved: approve allows (with the
// user's answers for AskUserQuestion), approveForSession allows and adds
// a session-scoped rule, deny denies, cancel denies and interrupts.
func (a *Adapter) Respond(_ context.Context, requestID string, ans provider.Answer) error {
	a.mu.Lock()
	ap, ok := a.approvals[requestID]
	if ok && !slices.Contains(ap.options, ans.Decision) {
		a.mu.Unlock()
		return fmt.Errorf("request %s: %w", requestID, &provider.DecisionError{Decision: ans.Decision, Allowed: slices.Clone(ap.options)})
	}
	delete(a.approvals, requestID)
	if ok {
		if ans.Decision == provider.DecisionDeny || ans.Decision == provider.DecisionCancel {
			a.denied[ap.toolUseID] = true
		}
		if ans.Decision == provider.DecisionCancel && a.turn != nil && a.turn.ours == ap.turnID {
			a.turn.interrupted = true
		}
	}
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("request %s: %w", requestID, provider.ErrRequestNotFound)
	}
	a.emit(event.New(event.ApprovalResolved, ap.turnID, event.ApprovalResolvedData{RequestID: requestID, Decision: ans.Decision, Origin: ans.Origin}))
	if err := a.respond(ap.rawID, permissionResult(ap, ans)); err != nil {
		return fmt.Errorf("request %s: %w", requestID, err)
	}
	return nil
}

// permissionResult is the CLI's PermissionResult for ans.
func permissionResult(ap *approval, ans provider.Answer) map[string]any {
	switch ans.Decision {
	case provider.DecisionDeny:
		return map[string]any{"behavior": "deny", "message": "The user denied this tool use."}
	case provider.DecisionCancel:
		return map[string]any{"behavior": "deny", "message": "The user cancelled the turn.", "interrupt": true}
	}
	var input map[string]any
	_ = json.Unmarshal(ap.input, &input)
	if input == nil {
		input = map[string]any{}
	}
	if ap.kind == "userInput" && len(ans.Answers) > 0 {
		answers := map[string]any{}
		for q, v := range ans.Answers {
			answers[q] = joinAnswers(v)
		}
		input["answers"] = answers
	}
	r := map[string]any{"behavior": "allow", "updatedInput": input}
	if ans.Decision == provider.DecisionApproveForSession {
		r["updatedPermissions"] = sessionRules(ap)
	}
	return r
}

// sessionRules: the CLI's own suggestions, scoped to the session, or a
// rule allowing the tool for the session.
func sessionRules(ap *approval) []any {
	var out []any
	for _, s := range ap.suggestions {
		var u map[string]any
		if json.Unmarshal(s, &u) == nil && u["type"] == "addRules" {
			u["destination"] = "session"
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		out = append(out, map[string]any{"type": "addRules", "behavior": "allow", "destination": "session",
			"rules": []any{map[string]any{"toolName": ap.toolName}}})
	}
	return out
}

func joinAnswers(v []string) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}

// takeApprovalsLocked removes the pending approvals of turnID and returns
// their ids in request order (one asked outside any turn stays open until
// answered, withdrawn, or the child ends). Needs mu.
func (a *Adapter) takeApprovalsLocked(turnID string) []string {
	ids := make([]string, 0, len(a.approvals))
	for k, ap := range a.approvals {
		if ap.turnID == turnID {
			ids = append(ids, k)
		}
	}
	slices.SortFunc(ids, func(x, y string) int { return int(a.approvals[x].order - a.approvals[y].order) })
	for _, k := range ids {
		delete(a.approvals, k)
	}
	return ids
}
