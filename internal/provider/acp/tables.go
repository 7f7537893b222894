package acp

import (
	"encoding/json"

	"github.com/sessiond/sessiond/internal/event"
)

// The mapping of ACP to the journal, in one place (PROTOCOL.md "ACP agents
// as providers"; docs/protocol.md). Every session/update kind of the
// pinned SDK's schema is in exactly one of updateMapped, updateIgnored
// (known, deliberately not journaled: the reason is next to it) or
// updateNotices (journaled as provider.notice, once per kind and
// process); a test walks the schema and fails on a kind in none. A kind in
// none (a newer agent) is a notice once too.

// updateMapped: sessionUpdate kind -> handler (reader goroutine, turn open).
var updateMapped = map[string]func(a *Adapter, t *openTurn, u json.RawMessage) []event.Draft{
	"agent_message_chunk": (*Adapter).onMessageChunk, // message.delta; the prompt's answer closes message.completed
	"agent_thought_chunk": (*Adapter).onThoughtChunk, // item reasoning (item.delta)
	"tool_call":           (*Adapter).onToolCall,     // item by kind (toolKinds)
	"tool_call_update":    (*Adapter).onToolCall,     // the same item, updated; completed/failed completes it
	"plan":                (*Adapter).onPlan,         // turn.plan
	"usage_update":        (*Adapter).onUsage,        // turn.usage (context window use, cost)
}

// updateIgnored: known kinds the journal does not need, and why.
var updateIgnored = map[string]string{
	"available_commands_update": "the agent's slash commands: a UI menu, not something the turn did",
	"current_mode_update":       "the agent's mode; the daemon does not switch modes",
	"config_option_update":      "the agent's session options; the daemon does not set them",
	"session_info_update":       "the agent's own title and metadata; the session title is the client's",
}

// updateNotices: known kinds journaled as provider.notice (once per kind).
var updateNotices = map[string]string{
	"user_message_chunk":       "info", // outside a load's replay: the agent echoing a prompt
	"notice":                   "info",
	"compaction_update":        "info",
	"compaction_summary_chunk": "info",
}

// toolKinds: an ACP ToolKind -> the item kind it journals as; any other
// kind is a toolCall (name = title).
var toolKinds = map[string]string{
	"execute": event.KindCommandExecution,
	"edit":    event.KindFileChange,
	"delete":  event.KindFileChange,
	"move":    event.KindFileChange,
}

// approvalKinds: the ToolKind of a permission request's tool call ->
// approval.requested's kind; any other is toolCall.
var approvalKinds = map[string]string{
	"execute": "command",
	"edit":    "fileChange",
	"delete":  "fileChange",
	"move":    "fileChange",
}

// permissionDecisions: a PermissionOptionKind -> the decision it offers.
var permissionDecisions = map[string]string{
	"allow_once":    "approve",
	"allow_always":  "approveForSession",
	"reject_once":   "deny",
	"reject_always": "deny",
}

// Stop reasons: how the prompt's stopReason ends the turn.
const (
	stopCompleted = iota + 1
	stopCancelled
)

var stopReasons = map[string]int{
	"end_turn":          stopCompleted,
	"max_tokens":        stopCompleted,
	"max_turn_requests": stopCompleted,
	"refusal":           stopCompleted,
	"cancelled":         stopCancelled, // interrupted: user_cancel after our session/cancel, approval_denied after a denial
}
