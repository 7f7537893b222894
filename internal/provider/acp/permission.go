package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// approval is a session/request_permission waiting for Respond.
type approval struct {
	rawID      json.RawMessage // the agent's request id as sent
	turnID     string
	toolCallID string
	optionIDs  map[string]string // decision -> the optionId that gives it
	options    []string
	order      int64
}

// size is about the bytes ap holds (approvalBytes counts them).
func (ap *approval) size() int {
	n := len(ap.rawID) + len(ap.turnID) + len(ap.toolCallID)
	for d, id := range ap.optionIDs {
		n += len(d) + len(id)
	}
	for _, o := range ap.options {
		n += len(o)
	}
	return n
}

// maxApprovalBytes bounds the bytes the open permission requests hold
// (their ids, optionIds, tool call ids); one more is refused.
var maxApprovalBytes = 1 << 20

// maxOptionIDBytes bounds a permission option's optionId.
const maxOptionIDBytes = 1024

type permissionParams struct {
	SessionID string          `json:"sessionId"`
	ToolCall  json.RawMessage `json:"toolCall"`
	Options   []struct {
		OptionID string `json:"optionId"`
		Name     string `json:"name"`
		Kind     string `json:"kind"`
	} `json:"options"`
}

// decisionOrder is the order approval.requested lists decisions in.
var decisionOrder = []string{provider.DecisionApprove, provider.DecisionApproveForSession, provider.DecisionDeny}

// onPermission relays session/request_permission as approval.requested:
// its kind from the tool call's kind, its options the decisions its
// permission options allow (permissionDecisions), plus cancel. A request
// for another session, or with no option the daemon can choose, is
// refused at once (invalid params, naming why) and journaled as resolved
// by the daemon; one during a turn we cancelled is answered cancelled.
func (a *Adapter) onPermission(m *message) {
	id, ok := provider.RequestKey(m.ID)
	if !ok {
		a.anomaly("bad_request_id", "id", capText(string(m.ID), 40))
		return
	}
	key := a.o.RequestIDPrefix + id
	var p permissionParams
	_, _ = decodeLenient(m.Params, &p)
	var tc struct {
		ToolCallID string `json:"toolCallId"`
		Kind       string `json:"kind"`
	}
	_, _ = decodeLenient(p.ToolCall, &tc)
	tc.ToolCallID = toolKey(tc.ToolCallID)
	ap := &approval{rawID: m.ID, toolCallID: tc.ToolCallID, optionIDs: map[string]string{}}
	seen := map[string]bool{}
	repeated, long := "", 0
	for _, o := range p.Options {
		if len(o.OptionID) > maxOptionIDBytes {
			long = len(o.OptionID)
			continue
		}
		if seen[o.OptionID] && repeated == "" {
			repeated = o.OptionID
		}
		seen[o.OptionID] = true
		if d, ok := permissionDecisions[o.Kind]; ok && o.OptionID != "" && ap.optionIDs[d] == "" {
			ap.optionIDs[d] = o.OptionID
		}
	}
	for _, d := range decisionOrder {
		if ap.optionIDs[d] != "" {
			ap.options = append(ap.options, d)
		}
	}
	a.mu.Lock()
	t := a.turn
	sid := a.threadID
	if a.loading != "" {
		sid = a.loading // the session a session/load replays is the agent's session already
	}
	_, dup := a.approvals[key]
	// No turn to ask for: not during a load's replay (the agent's pending
	// request of its session), nor after our cancel (answered cancelled).
	noTurn := t == nil && a.loading == "" && !a.afterCancel
	full := len(a.approvals) >= maxOpenApprovals
	heavy := a.approvalBytes+ap.size()+len(key) > maxApprovalBytes
	held := a.approvalBytes
	a.mu.Unlock()
	turnID := ""
	if t != nil {
		turnID = t.ours
	}
	ap.turnID = turnID
	var refuse, why string // why: the kind of refusal (one notice per kind)
	switch {
	case dup:
		refuse, why = "a permission request with this id is already open", "duplicate_id"
	case noTurn:
		// Relayed, it would stay open with no turn to end it (and keep
		// the session busy, its idle eviction deferred, for ever).
		refuse, why = "request_permission outside a turn: no session/prompt of this session is running", "outside_turn"
	case full:
		refuse, why = fmt.Sprintf("request_permission: %d permission requests are open already", maxOpenApprovals), "too_many_open"
	case heavy:
		refuse, why = fmt.Sprintf("request_permission: the permission requests open hold %d bytes already (max %d)", held, maxApprovalBytes), "too_many_bytes"
	case long > 0:
		refuse, why = fmt.Sprintf("request_permission: an optionId of %d bytes is over %d bytes", long, maxOptionIDBytes), "long_option_id"
	case repeated != "":
		// One id for two options: the agent alone decides what it means,
		// so no decision of ours can be relayed as the option it names.
		refuse, why = fmt.Sprintf("request_permission repeats optionId %q; options must be told apart", capText(repeated, 80)), "repeated_option"
	case p.SessionID != sid:
		refuse, why = fmt.Sprintf("request_permission names session %q; this agent's session is %q", capText(p.SessionID, 80), sid), "other_session"
	case len(ap.options) == 0:
		refuse, why = fmt.Sprintf("request_permission offers no option sessiond can choose (options: %s)", capText(string(mustJSON(p.Options)), 300)), "no_option"
	}
	if refuse != "" {
		a.anomaly("permission_refused", "request_id", capText(key, 60), "reason", refuse)
		a.noticeOnce("permission_refused:"+why, "warning", "bad_permission_request", "the agent's permission request was refused: "+refuse)
		if !dup {
			a.emit(event.New(event.ApprovalResolved, turnID, event.ApprovalResolvedData{
				RequestID: key, Decision: provider.DecisionDeny, By: "daemon", Reason: refuse}))
		}
		if !dup {
			// A duplicate is not answered: the answer would carry the open
			// request's id, and the agent would take it for that one's.
			a.respondErrorAsync(m.ID, codeInvalidParams, refuse)
		}
		return
	}
	ap.options = append(ap.options, provider.DecisionCancel)
	kind := approvalKinds[tc.Kind]
	if t == nil && !a.afterCancelled() {
		a.anomaly("permission_outside_turn", "request_id", capText(key, 60))
	}
	// emitMu is held from the request's registration to its
	// approval.requested: a cancel racing it (cancelApprovals) journals the
	// resolution after the request, never before.
	a.emitMu.Lock()
	a.mu.Lock()
	var ds []event.Draft
	if t != nil && a.turn == t && len(p.ToolCall) > 0 {
		if tl := t.tools[tc.ToolCallID]; tl != nil && tc.Kind == "" {
			kind = approvalKinds[tl.acpKind]
		} else if tl == nil {
			ds = a.onToolCall(t, p.ToolCall) // a call first announced by its permission request
		}
	}
	cancelled := t != nil && t.interrupted || t == nil && a.afterCancel
	if !cancelled {
		a.approvalN++
		ap.order = a.approvalN
		a.approvals[key] = ap
		a.approvalBytes += ap.size() + len(key)
	}
	a.mu.Unlock()
	if kind == "" {
		kind = "toolCall"
	}
	if !cancelled {
		ds = append(ds, event.New(event.ApprovalRequested, turnID, event.ApprovalRequestedData{RequestID: key, Kind: kind,
			ItemID: tc.ToolCallID, Detail: rawOf(m.Params), Options: slices.Clone(ap.options)}))
	}
	for _, d := range ds {
		if !a.stopped {
			a.o.Emit(d)
		}
	}
	a.emitMu.Unlock()
	if cancelled {
		// After our session/cancel every permission request is answered cancelled.
		a.anomaly("permission_after_cancel", "request_id", capText(key, 60))
		a.respondAsync(m.ID, cancelledOutcome)
	}
}

func (a *Adapter) afterCancelled() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.afterCancel
}

// maxOpenApprovals bounds the permission requests waiting for an answer;
// one more is refused.
const maxOpenApprovals = 1024

var cancelledOutcome = map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Respond answers the pending permission requestID and emits
// approval.resolved: approve / approveForSession / deny select the
// option of that kind; cancel answers {outcome:"cancelled"} and cancels
// the turn (session/cancel).
func (a *Adapter) Respond(ctx context.Context, requestID string, ans provider.Answer) error {
	if ans.Decision != provider.DecisionCancel {
		// Held until the answer is written: a cancel (Interrupt) either
		// comes after it, or takes the request first and answers it
		// cancelled. Never selected after session/cancel.
		a.answerMu.Lock()
		defer a.answerMu.Unlock()
	}
	a.mu.Lock()
	ap, ok := a.approvals[requestID]
	if !ok {
		a.mu.Unlock()
		return fmt.Errorf("request %s: %w", requestID, provider.ErrRequestNotFound)
	}
	if !slices.Contains(ap.options, ans.Decision) {
		a.mu.Unlock()
		return fmt.Errorf("request %s: %w", requestID, &provider.DecisionError{Decision: ans.Decision, Allowed: slices.Clone(ap.options)})
	}
	a.dropApprovalLocked(requestID)
	if t := a.turn; t != nil && t.ours == ap.turnID && (ans.Decision == provider.DecisionDeny || ans.Decision == provider.DecisionCancel) {
		t.denied = true
		if tl := t.tools[ap.toolCallID]; tl != nil {
			tl.denied = true
		}
	}
	a.mu.Unlock()
	a.emit(event.New(event.ApprovalResolved, ap.turnID, event.ApprovalResolvedData{RequestID: requestID, Decision: ans.Decision, Origin: ans.Origin}))
	if ans.Decision == provider.DecisionCancel {
		// session/cancel first: the agent may end the turn as soon as it
		// reads the cancelled answer, and the turn is ours to cancel.
		_, ierr := a.Interrupt(ctx)
		if err := a.respond(ap.rawID, cancelledOutcome); err != nil {
			return fmt.Errorf("request %s: %w", requestID, err)
		}
		if ierr != nil {
			return fmt.Errorf("request %s: %w", requestID, ierr)
		}
		return nil
	}
	res := map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": ap.optionIDs[ans.Decision]}}
	if err := a.respond(ap.rawID, res); err != nil {
		return fmt.Errorf("request %s: %w", requestID, err)
	}
	return nil
}

// cancelApprovals answers every pending permission of turnID
// {outcome:"cancelled"} and journals it resolved cancel by the daemon.
func (a *Adapter) cancelApprovals(turnID, reason string) {
	a.mu.Lock()
	keys := make([]string, 0, len(a.approvals))
	for k, ap := range a.approvals {
		if ap.turnID == turnID {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y string) int { return int(a.approvals[x].order - a.approvals[y].order) })
	aps := make([]*approval, len(keys))
	for i, k := range keys {
		aps[i] = a.approvals[k]
		a.dropApprovalLocked(k)
	}
	a.mu.Unlock()
	for i, k := range keys {
		a.emit(event.New(event.ApprovalResolved, turnID, event.ApprovalResolvedData{
			RequestID: k, Decision: provider.DecisionCancel, By: "daemon", Reason: reason}))
		a.respondAsync(aps[i].rawID, cancelledOutcome)
	}
}

// onWithdrawn: the agent's $/cancel_request for a permission nobody answered.
func (a *Adapter) onWithdrawn(rawID json.RawMessage) {
	id, ok := provider.RequestKey(rawID)
	if !ok {
		a.anomaly("bad_cancel_request", "id", capText(string(rawID), 40))
		return
	}
	key := a.o.RequestIDPrefix + id
	a.mu.Lock()
	ap, open := a.approvals[key]
	a.dropApprovalLocked(key)
	a.mu.Unlock()
	if open {
		a.emit(event.New(event.ApprovalResolved, ap.turnID, event.ApprovalResolvedData{
			RequestID: key, Decision: provider.DecisionCancel, By: "provider", Reason: "withdrawn"}))
	}
}

// dropApprovalLocked forgets the open permission request key, uncounting
// its bytes. Needs mu.
func (a *Adapter) dropApprovalLocked(key string) {
	if ap, ok := a.approvals[key]; ok {
		a.approvalBytes -= ap.size() + len(key)
		delete(a.approvals, key)
	}
}
