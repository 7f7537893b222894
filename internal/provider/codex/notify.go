package codex

import (
	"encoding/json"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// Every notification codex app-server v2 can send is in exactly one of
// three places: notifyMapped (turned into journal events), notifyIgnored
// (known, and deliberately not journaled: the reason is next to it) or
// notifyNotices (journaled as provider.notice). A test walks codex's
// generated JSON Schema and fails on a method in none of them. A method
// in none (a newer codex) is journaled once as a provider.notice.

// notifyMapped: method -> handler (reader goroutine).
var notifyMapped = map[string]func(a *Adapter, p json.RawMessage){
	"turn/started":                              (*Adapter).onTurnStarted,
	"turn/completed":                            (*Adapter).onTurnCompleted,
	"error":                                     (*Adapter).onError,
	"item/started":                              (*Adapter).onItemStarted,
	"item/completed":                            (*Adapter).onItemCompleted,
	"item/agentMessage/delta":                   (*Adapter).onAgentMessageDelta,
	"item/commandExecution/outputDelta":         deltaHandler(event.StreamOutput),
	"item/reasoning/textDelta":                  deltaHandler(event.StreamReasoning),
	"item/reasoning/summaryTextDelta":           deltaHandler(event.StreamReasoningSummary),
	"item/plan/delta":                           deltaHandler(event.StreamPlan),
	"item/fileChange/outputDelta":               deltaHandler(event.StreamPatch),
	"item/fileChange/patchUpdated":              (*Adapter).onPatchUpdated,
	"item/mcpToolCall/progress":                 (*Adapter).onProgress,
	"item/commandExecution/terminalInteraction": (*Adapter).onTerminalInteraction,
	"turn/plan/updated":                         (*Adapter).onPlanUpdated,
	"turn/diff/updated":                         (*Adapter).onDiffUpdated,
	"thread/tokenUsage/updated":                 (*Adapter).onTokenUsage,
	"serverRequest/resolved":                    (*Adapter).onRequestResolved,
	"account/rateLimits/updated":                (*Adapter).onRateLimits, // kept for a limited turn's resetsAt
}

// legacyEventPrefix: older codex releases mirrored every v2 notification
// as a v1 "codex/event/<type>" notification; the v2 ones are mapped.
const legacyEventPrefix = "codex/event/"

// notifyIgnored: known methods the journal does not need, and why.
var notifyIgnored = map[string]string{
	"thread/started":                        "Start's thread/start or thread/resume result carries the thread",
	"thread/status/changed":                 "turn state comes from turn/*; waiting on approval from the requests",
	"thread/readState/changed":              "read markers of codex's own UI",
	"thread/archived":                       "thread management the daemon does not use",
	"thread/unarchived":                     "thread management the daemon does not use",
	"thread/deleted":                        "thread management the daemon does not use",
	"thread/closed":                         "the child's exit is learned from the process",
	"thread/reverted":                       "thread management the daemon does not use",
	"thread/name/updated":                   "the session title is the client's",
	"thread/section/changed":                "codex UI organisation",
	"thread/attachment/updated":             "codex UI organisation",
	"thread/goal/updated":                   "codex UI organisation",
	"thread/goal/cleared":                   "codex UI organisation",
	"thread/prediction/updated":             "codex UI hints",
	"thread/queue/changed":                  "codex's own input queue; the daemon sends one turn at a time",
	"thread/project/updated":                "codex UI organisation",
	"project/changed":                       "codex UI organisation",
	"thread/environment/connected":          "remote environments are not used",
	"thread/environment/disconnected":       "remote environments are not used",
	"thread/settings/updated":               "settings are the CODEX_HOME's",
	"thread/compacted":                      "deprecated; the contextCompaction item is journaled",
	"skills/changed":                        "codex UI state",
	"hook/started":                          "codex hooks are the user's own configuration",
	"hook/completed":                        "codex hooks are the user's own configuration",
	"item/autoApprovalReview/started":       "automatic review is internal to codex; the approval itself is relayed",
	"item/autoApprovalReview/completed":     "automatic review is internal to codex; the approval itself is relayed",
	"item/reasoning/summaryPartAdded":       "a separator; the summary parts come with item/completed",
	"command/exec/outputDelta":              "answers command/exec, which the daemon never sends",
	"process/outputDelta":                   "answers the process API, which the daemon never uses",
	"process/exited":                        "answers the process API, which the daemon never uses",
	"mcpServer/oauthLogin/completed":        "answers mcpServer/oauth/login, which the daemon never sends",
	"mcpServer/event/stream/notification":   "MCP server traffic for codex's own UI",
	"account/updated":                       "account state of codex's UI",
	"account/gatewayOAuth/changed":          "account state of codex's UI",
	"account/login/completed":               "answers account/login, which the daemon never sends",
	"app/list/updated":                      "codex app directory",
	"remoteControl/status/changed":          "codex remote control is not used",
	"externalAgentConfig/import/progress":   "answers an import the daemon never starts",
	"externalAgentConfig/import/completed":  "answers an import the daemon never starts",
	"fs/changed":                            "answers fs/watch, which the daemon never sends",
	"fuzzyFileSearch/sessionUpdated":        "answers fuzzy file search, which the daemon never starts",
	"fuzzyFileSearch/sessionCompleted":      "answers fuzzy file search, which the daemon never starts",
	"turn/moderationMetadata":               "moderation metadata of codex's UI",
	"model/safetyBuffering/updated":         "a streaming UI hint",
	"windowsSandbox/setupCompleted":         "Windows only",
	"thread/realtime/started":               "realtime (voice) sessions are never started",
	"thread/realtime/itemAdded":             "realtime (voice) sessions are never started",
	"thread/realtime/item/started":          "realtime (voice) sessions are never started",
	"thread/realtime/item/transcript/delta": "realtime (voice) sessions are never started",
	"thread/realtime/item/completed":        "realtime (voice) sessions are never started",
	"thread/realtime/transcript/delta":      "realtime (voice) sessions are never started",
	"thread/realtime/transcript/done":       "realtime (voice) sessions are never started",
	"thread/realtime/outputAudio/delta":     "realtime (voice) sessions are never started",
	"thread/realtime/sdp":                   "realtime (voice) sessions are never started",
	"thread/realtime/error":                 "realtime (voice) sessions are never started",
	"thread/realtime/closed":                "realtime (voice) sessions are never started",
}

// notifyNotices: the provider's own warnings, journaled as provider.notice
// at the level given.
var notifyNotices = map[string]string{
	"warning":                                 "warning",
	"configWarning":                           "warning",
	"deprecationNotice":                       "warning",
	"guardianWarning":                         "warning",
	"windows/worldWritableWarning":            "warning",
	"model/rerouted":                          "info",
	"model/verification":                      "info",
	"modelProvider/authRecoveryStarted":       "info",
	"modelProvider/authRecoveryCompleted":     "info",
	"autoApprovalReview/strictReviewRequired": "info",
	"mcpServer/startupStatus/updated":         "info",
}

func (a *Adapter) handleNotification(m *message) {
	a.mu.Lock()
	a.reading = m.Method
	a.mu.Unlock()
	if h, ok := notifyMapped[m.Method]; ok {
		h(a, m.Params)
		return
	}
	if _, ok := notifyIgnored[m.Method]; ok || strings.HasPrefix(m.Method, legacyEventPrefix) {
		return
	}
	if lvl, ok := notifyNotices[m.Method]; ok {
		a.notice(lvl, m.Method, noticeText(m.Method, m.Params))
		return
	}
	// A method this adapter does not know (a newer provider): journaled
	// once per method, so it is seen but cannot flood the journal.
	a.mu.Lock()
	first := !a.warned["notice:"+m.Method]
	a.warned["notice:"+m.Method] = true
	a.anomalyLocked("unknown_notification", "method", m.Method)
	a.mu.Unlock()
	if first {
		a.notice("info", "unknown_notification", "provider sent an unknown notification "+truncate([]byte(m.Method), 100))
	}
}

// params decodes p into v; a shape that does not fit is an anomaly.
func (a *Adapter) params(method string, p json.RawMessage, v any) bool {
	if len(p) == 0 {
		a.anomaly("bad_params", "method", method, "err", "no params")
		return false
	}
	return a.decode(method, p, v)
}

// decode unmarshals data (of method) into v: a field of the wrong type is
// left zero and logged (bad_field), the rest is read, so a damaged field
// never costs a whole notification (the turn/completed that ends a turn,
// an item's completion). False for data that is not JSON of v's shape.
func (a *Adapter) decode(method string, data []byte, v any) bool {
	ok, bad := provider.Decode(data, v)
	if bad != nil {
		a.anomaly("bad_field", "method", truncate([]byte(method), 100), "field", truncate([]byte(bad.Field), 60), "value", bad.Value)
	}
	if !ok {
		a.anomaly("bad_params", "method", truncate([]byte(method), 100))
	}
	return ok
}

// notice journals a provider.notice, in the open turn when there is one.
func (a *Adapter) notice(level, code, msg string) {
	a.mu.Lock()
	turnID := ""
	if a.turn != nil {
		turnID = a.turn.ours
	}
	a.mu.Unlock()
	a.emit(event.New(event.ProviderNotice, turnID, event.NoticeData{Level: level, Message: capText(msg, 4096), Code: code}))
}

// noticeText is a person's reading of a notice's params: its message or
// summary (+ details), else the params themselves, shortened.
func noticeText(method string, p json.RawMessage) string {
	var n struct {
		Message   string `json:"message"`
		Summary   string `json:"summary"`
		Details   string `json:"details"`
		FromModel string `json:"fromModel"`
		ToModel   string `json:"toModel"`
		Reason    string `json:"reason"`
	}
	_ = json.Unmarshal(p, &n)
	switch {
	case n.FromModel != "":
		return "model rerouted from " + n.FromModel + " to " + n.ToModel + " (" + n.Reason + ")"
	case n.Message != "":
		return n.Message
	case n.Summary != "" && n.Details != "":
		return n.Summary + ": " + n.Details
	case n.Summary != "":
		return n.Summary
	}
	return method + " " + truncate(p, 300)
}

// capText cuts s to at most n bytes on a rune boundary.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") // drops a rune cut in half
}
