package codex

import (
	"encoding/json"
	"slices"

	"github.com/sessiond/sessiond/internal/event"
)

// relayed is a server request a person answers.
type relayed struct {
	kind    string
	options []string
}

// Every request codex app-server v2 can send is either relayed (an
// approval.requested that waits for agentSession.respond) or refused at
// once with the provider's safe answer. A test walks codex's generated
// schema and fails on a method in neither.
var requestRelayed = map[string]relayed{
	"item/commandExecution/requestApproval": {"command", []string{DecisionApprove, DecisionApproveForSession, DecisionDeny, DecisionCancel}},
	"item/fileChange/requestApproval":       {"fileChange", []string{DecisionApprove, DecisionApproveForSession, DecisionDeny, DecisionCancel}},
	"item/permissions/requestApproval":      {"permissions", []string{DecisionApprove, DecisionApproveForSession, DecisionDeny}},
	"item/tool/requestUserInput":            {"userInput", []string{DecisionApprove, DecisionDeny}},
	"mcpServer/elicitation/request":         {"elicitation", []string{DecisionApprove, DecisionDeny, DecisionCancel}},
}

// refusal is the safe automatic answer to a request nobody can answer:
// a result, or (when the provider's answer type has no refusal) an error.
type refusal struct {
	reason string
	result any
	err    *RPCError
}

var requestRefused = map[string]refusal{
	"item/tool/call": {reason: "dynamic tools are not provided by sessiond",
		result: map[string]any{"success": false, "contentItems": []any{
			map[string]any{"type": "inputText", "text": "sessiond: dynamic tools are not available"}}}},
	"account/chatgptAuthTokens/refresh": {reason: "sessiond does not manage provider credentials",
		err: &RPCError{Code: -32000, Message: "sessiond does not manage ChatGPT auth tokens"}},
	"attestation/generate": {reason: "sessiond cannot attest this client",
		err: &RPCError{Code: -32000, Message: "sessiond cannot generate client attestations"}},
	"applyPatchApproval": {reason: "legacy v1 approval: not relayed",
		result: map[string]any{"decision": map[string]any{"denied": map[string]any{"rejection": "sessiond relays only v2 approvals"}}}},
	"execCommandApproval": {reason: "legacy v1 approval: not relayed",
		result: map[string]any{"decision": map[string]any{"denied": map[string]any{"rejection": "sessiond relays only v2 approvals"}}}},
}

// codeInvalidRequest answers a request that reuses the id of one still open.
const codeInvalidRequest = -32600

func (a *Adapter) handleServerRequest(m *message) {
	key, ok := a.requestKey(m.ID)
	if !ok {
		a.anomaly("bad_request_id", "method", truncate([]byte(m.Method), 100), "id", truncate(m.ID, 40))
		return // no answer can name it
	}
	turnID := ""
	a.mu.Lock()
	if a.turn != nil {
		turnID = a.turn.ours
	}
	_, dup := a.approvals[key]
	a.mu.Unlock()
	if dup {
		// JSON-RPC ids are unique among open requests: the open one stays
		// open and answerable, this one is refused (and never journaled
		// under the open one's requestId).
		a.refuseDuplicate(m, key)
		return
	}
	r, ok := requestRelayed[m.Method]
	if !ok {
		a.refuse(m, key, turnID)
		return
	}
	var p struct {
		ItemID string `json:"itemId"`
		TurnID string `json:"turnId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	a.mu.Lock()
	if t := a.turn; t != nil && t.provider != "" && p.TurnID != "" && p.TurnID != t.provider {
		// Another turn's request under this thread's id (a provider
		// mixing up its threads): nobody here is asked; it is answered.
		a.anomalyLocked("request_outside_open_turn", "method", truncate([]byte(m.Method), 100), "turn_id", truncate([]byte(p.TurnID), 80))
		a.mu.Unlock()
		if err := a.write(outError{ID: m.ID, Error: RPCError{Code: codeInvalidRequest,
			Message: "turn " + truncate([]byte(p.TurnID), 80) + " is not this thread's open turn"}}); err != nil {
			a.log.Warn("answer provider request", "method", truncate([]byte(m.Method), 100), "err", err)
		}
		return
	}
	a.approvalN++
	a.approvals[key] = &approval{rawID: append([]byte(nil), m.ID...), turnID: turnID, method: m.Method,
		kind: r.kind, options: r.options, params: append([]byte(nil), m.Params...), order: a.approvalN}
	a.mu.Unlock()
	detail := json.RawMessage(append([]byte(nil), m.Params...))
	if len(detail) > event.MaxRawBytes || !json.Valid(detail) {
		detail = nil
	}
	a.emit(event.New(event.ApprovalRequested, turnID, event.ApprovalRequestedData{
		RequestID: key, Kind: r.kind, ItemID: p.ItemID, Detail: detail, Options: r.options,
	}))
}

// refuseDuplicate answers a request whose id is that of an open one with
// an error; the journal gets one notice per child.
func (a *Adapter) refuseDuplicate(m *message, key string) {
	a.mu.Lock()
	first := !a.warned["notice:duplicate_request_id"]
	a.warned["notice:duplicate_request_id"] = true
	a.anomalyLocked("duplicate_request_id", "method", truncate([]byte(m.Method), 100), "request_id", truncate([]byte(key), 60))
	a.mu.Unlock()
	if first {
		a.notice("warning", "duplicate_request_id", "provider sent a request with the id of one still open ("+
			truncate([]byte(key), 60)+"); it was refused")
	}
	err := a.write(outError{ID: m.ID, Error: RPCError{Code: codeInvalidRequest,
		Message: "request id " + truncate(m.ID, 60) + " is already open; ids must be unique among open requests"}})
	if err != nil {
		a.log.Warn("answer provider request", "method", truncate([]byte(m.Method), 100), "err", err)
	}
}

// refuse answers a request nobody can answer with the provider's safe
// refusal and journals it as resolved by the daemon.
func (a *Adapter) refuse(m *message, key, turnID string) {
	rf, known := requestRefused[m.Method]
	if !known {
		a.anomaly("unknown_request", "method", truncate([]byte(m.Method), 100))
		rf = refusal{reason: "unknown request " + truncate([]byte(m.Method), 100),
			err: &RPCError{Code: codeMethodNotFound, Message: "method not found: " + truncate([]byte(m.Method), 100)}}
	}
	a.emit(event.New(event.ApprovalResolved, turnID, event.ApprovalResolvedData{
		RequestID: key, Decision: DecisionDeny, By: "daemon", Reason: rf.reason}))
	var err error
	if rf.err != nil {
		err = a.write(outError{ID: m.ID, Error: *rf.err})
	} else {
		err = a.write(outResult{ID: m.ID, Result: rf.result})
	}
	if err != nil {
		a.log.Warn("answer provider request", "method", truncate([]byte(m.Method), 100), "err", err)
	}
}

// takeApprovalsLocked removes the approvals of turnID (all, when empty)
// and returns their ids in request order. Needs mu.
func (a *Adapter) takeApprovalsLocked(turnID string) []string {
	var open []*approval
	keys := map[*approval]string{}
	for k, ap := range a.approvals {
		if turnID == "" || ap.turnID == turnID {
			open = append(open, ap)
			keys[ap] = k
			delete(a.approvals, k)
		}
	}
	slices.SortFunc(open, func(x, y *approval) int { return int(x.order - y.order) })
	ids := make([]string, len(open))
	for i, ap := range open {
		ids[i] = keys[ap]
	}
	return ids
}
