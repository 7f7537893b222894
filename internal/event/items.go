package event

import "encoding/json"

// Item event types (capability agent-session.items.v1): what the agent did,
// in one vocabulary for every provider (PROTOCOL.md "Items").
const (
	ItemStarted    = "item.started"
	ItemDelta      = "item.delta"
	ItemCompleted  = "item.completed"
	TurnPlan       = "turn.plan"
	TurnDiff       = "turn.diff"
	TurnUsage      = "turn.usage"
	ProviderNotice = "provider.notice"
)

// ItemsV1 reports whether an event type is delivered only to connections
// that negotiated agent-session.items.v1.
func ItemsV1(typ string) bool {
	switch typ {
	case ItemStarted, ItemDelta, ItemCompleted, TurnPlan, TurnDiff, TurnUsage, ProviderNotice:
		return true
	}
	return false
}

// Item kinds.
const (
	KindReasoning        = "reasoning"
	KindCommandExecution = "commandExecution"
	KindFileChange       = "fileChange"
	KindMcpToolCall      = "mcpToolCall"
	KindWebSearch        = "webSearch"
	KindToolCall         = "toolCall"
	KindSubagent         = "subagent"
	KindPlan             = "plan"
	KindCompaction       = "compaction"
	KindOther            = "other"
)

// Item statuses carried by item.completed.
const (
	ItemCompletedStatus   = "completed"
	ItemFailedStatus      = "failed"
	ItemDeclinedStatus    = "declined"
	ItemInterruptedStatus = "interrupted"
)

// Delta streams of item.delta.
const (
	StreamOutput           = "output"
	StreamReasoning        = "reasoning"
	StreamReasoningSummary = "reasoningSummary"
	StreamPlan             = "plan"
	StreamPatch            = "patch"
	StreamProgress         = "progress"
)

// Caps on what an item carries (PROTOCOL.md): raw is omitted past
// MaxRawBytes; output is kept up to MaxOutputBytes per item.
const (
	MaxRawBytes    = 64 << 10
	MaxOutputBytes = 64 << 10
)

// ItemData is the data of item.started and item.completed.
type ItemData struct {
	ItemID         string          `json:"itemId"`
	Kind           string          `json:"kind"`
	ParentItemID   string          `json:"parentItemId,omitempty"`
	Title          string          `json:"title,omitempty"`
	Status         string          `json:"status,omitempty"` // item.completed only
	Payload        any             `json:"payload"`
	Raw            json.RawMessage `json:"raw,omitempty"`
	RawTruncated   bool            `json:"rawTruncated,omitempty"`
	ProviderTurnID string          `json:"providerTurnId,omitempty"`
}

// ItemDeltaData is the data of item.delta.
type ItemDeltaData struct {
	ItemID         string `json:"itemId"`
	Stream         string `json:"stream"`
	Text           string `json:"text"`
	ProviderTurnID string `json:"providerTurnId,omitempty"`
}

// PlanStep is one step of turn.plan.
type PlanStep struct {
	Step   string `json:"step"`
	Status string `json:"status"`
}

// TurnPlanData is the data of turn.plan.
type TurnPlanData struct {
	Explanation string     `json:"explanation,omitempty"`
	Steps       []PlanStep `json:"steps"`
}

// TurnDiffData is the data of turn.diff.
type TurnDiffData struct {
	Diff string `json:"diff"`
}

// TurnUsageData is the data of turn.usage.
type TurnUsageData struct {
	InputTokens       int64    `json:"inputTokens"`
	CachedInputTokens int64    `json:"cachedInputTokens"`
	OutputTokens      int64    `json:"outputTokens"`
	ReasoningTokens   int64    `json:"reasoningTokens"`
	TotalTokens       int64    `json:"totalTokens"`
	ContextWindow     *int64   `json:"contextWindow,omitempty"`
	CostUSD           *float64 `json:"costUsd,omitempty"`
}

// NoticeData is the data of provider.notice.
type NoticeData struct {
	Level   string `json:"level"` // info|warning
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}
