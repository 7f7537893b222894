package codex

import (
	"encoding/json"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
)

// turnNote is the part of turn and delta notifications the adapter reads.
type turnNote struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	Delta    string `json:"delta"`
	Turn     *struct {
		ID     string          `json:"id"`
		Status string          `json:"status"`
		Error  json.RawMessage `json:"error"`
	} `json:"turn"`
	Error     json.RawMessage `json:"error"`
	WillRetry bool            `json:"willRetry"`
}

func (a *Adapter) onTurnStarted(p json.RawMessage) {
	var n turnNote
	if a.params("turn/started", p, &n) && n.Turn != nil {
		a.resolveTurn(n.ThreadID, n.Turn.ID)
	}
}

func (a *Adapter) onTurnCompleted(p json.RawMessage) {
	var n turnNote
	if !a.params("turn/completed", p, &n) {
		return
	}
	if n.Turn == nil {
		a.anomaly("turn_completed_without_turn")
		return
	}
	a.completeTurn(n.ThreadID, n.Turn.ID, n.Turn.Status, errorText(n.Turn.Error), isLimitError(n.Turn.Error))
}

// onError: an error the provider retries is a notice; a final one is kept
// as the turn's error and does not end the turn. codex follows it with its
// own turn/completed {failed}, and until then the turn is still active in
// codex: a turn/start sent in between is folded into that dying turn (its
// answer carries the old turn's id, the input is never sent to the model),
// so the turn must stay open here, refusing the next send, until then.
func (a *Adapter) onError(p json.RawMessage) {
	var n turnNote
	if !a.params("error", p, &n) {
		return
	}
	if n.WillRetry {
		a.notice("warning", "retrying", "provider error, retrying: "+errorText(n.Error))
		return
	}
	t, ok := a.resolveTurn(n.ThreadID, n.TurnID)
	if !ok {
		return
	}
	a.mu.Lock()
	if a.turn != nil && a.turn.ours == t.ours && a.turn.failure == "" {
		a.turn.failure = errorText(n.Error)
		a.turn.limited = isLimitError(n.Error)
	}
	a.mu.Unlock()
}

func (a *Adapter) onAgentMessageDelta(p json.RawMessage) {
	var n turnNote
	if !a.params("item/agentMessage/delta", p, &n) {
		return
	}
	if t, ok := a.resolveTurn(n.ThreadID, n.TurnID); ok {
		a.emit(event.NewMessageDelta(t.ours, event.DeltaData{Text: n.Delta, ItemID: n.ItemID, ProviderTurnID: t.provider}))
	}
}

// deltaHandler maps an item's streaming notification to item.delta.
func deltaHandler(stream string) func(a *Adapter, p json.RawMessage) {
	return func(a *Adapter, p json.RawMessage) {
		var n turnNote
		if !a.params(stream+" delta", p, &n) {
			return
		}
		a.itemDelta(n.ThreadID, n.TurnID, n.ItemID, stream, n.Delta)
	}
}

// itemDelta emits item.delta; command output beyond MaxOutputBytes per
// item is counted, not journaled (item.completed says how much).
func (a *Adapter) itemDelta(threadID, turnID, itemID, stream, text string) {
	t, ok := a.resolveTurn(threadID, turnID)
	if !ok || text == "" {
		return
	}
	if stream == event.StreamOutput {
		a.mu.Lock()
		text = a.items.takeOutput(itemID, text)
		a.mu.Unlock()
		if text == "" {
			return
		}
	}
	a.emit(event.NewItemDelta(t.ours, event.ItemDeltaData{ItemID: itemID, Stream: stream, Text: text, ProviderTurnID: t.provider}))
}

func (a *Adapter) onPatchUpdated(p json.RawMessage) {
	var n struct {
		turnNote
		Changes []struct {
			Path string `json:"path"`
			Diff string `json:"diff"`
		} `json:"changes"`
	}
	if !a.params("item/fileChange/patchUpdated", p, &n) {
		return
	}
	var b strings.Builder
	for _, c := range n.Changes {
		b.WriteString(c.Diff)
	}
	a.itemDelta(n.ThreadID, n.TurnID, n.ItemID, event.StreamPatch, b.String())
}

func (a *Adapter) onProgress(p json.RawMessage) {
	var n struct {
		turnNote
		Message string `json:"message"`
	}
	if a.params("item/mcpToolCall/progress", p, &n) {
		a.itemDelta(n.ThreadID, n.TurnID, n.ItemID, event.StreamProgress, n.Message)
	}
}

func (a *Adapter) onTerminalInteraction(p json.RawMessage) {
	var n struct {
		turnNote
		Stdin string `json:"stdin"`
	}
	if a.params("item/commandExecution/terminalInteraction", p, &n) {
		a.itemDelta(n.ThreadID, n.TurnID, n.ItemID, event.StreamProgress, "stdin: "+n.Stdin)
	}
}

func (a *Adapter) onPlanUpdated(p json.RawMessage) {
	var n struct {
		turnNote
		Explanation *string          `json:"explanation"`
		Plan        []event.PlanStep `json:"plan"`
	}
	if !a.params("turn/plan/updated", p, &n) {
		return
	}
	if t, ok := a.resolveTurn(n.ThreadID, n.TurnID); ok {
		d := event.TurnPlanData{Steps: n.Plan}
		if d.Steps == nil {
			d.Steps = []event.PlanStep{}
		}
		if n.Explanation != nil {
			d.Explanation = *n.Explanation
		}
		a.emit(event.New(event.TurnPlan, t.ours, d))
	}
}

func (a *Adapter) onDiffUpdated(p json.RawMessage) {
	var n struct {
		turnNote
		Diff string `json:"diff"`
	}
	if !a.params("turn/diff/updated", p, &n) {
		return
	}
	if t, ok := a.resolveTurn(n.ThreadID, n.TurnID); ok {
		a.emit(event.New(event.TurnDiff, t.ours, event.TurnDiffData{Diff: n.Diff}))
	}
}

type tokenBreakdown struct {
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
}

// onTokenUsage: codex reports the thread's total and the last model call;
// the turn's usage is the sum of its calls ("last" of each update).
func (a *Adapter) onTokenUsage(p json.RawMessage) {
	var n struct {
		turnNote
		TokenUsage struct {
			Last               tokenBreakdown `json:"last"`
			ModelContextWindow *int64         `json:"modelContextWindow"`
		} `json:"tokenUsage"`
	}
	if !a.params("thread/tokenUsage/updated", p, &n) {
		return
	}
	a.mu.Lock()
	// A resume restores the thread's last usage, naming the thread's last
	// turn: no turn of ours. A reader that gets to that line only once
	// StartTurn opened our turn finds it not yet bound (turn/started binds
	// it, and codex reports a turn's usage only after that): it must not
	// bind our turn to the old one, whose id would then refuse every line
	// of the new turn.
	stale := a.turn == nil || a.turn.provider == ""
	a.mu.Unlock()
	if stale {
		return
	}
	t, ok := a.resolveTurn(n.ThreadID, n.TurnID)
	if !ok {
		return
	}
	l := n.TokenUsage.Last
	a.mu.Lock()
	u := &a.items.usage
	u.InputTokens += l.InputTokens
	u.CachedInputTokens += l.CachedInputTokens
	u.OutputTokens += l.OutputTokens
	u.ReasoningTokens += l.ReasoningOutputTokens
	u.TotalTokens += l.TotalTokens
	u.ContextWindow = n.TokenUsage.ModelContextWindow
	d := *u
	a.mu.Unlock()
	a.emit(event.New(event.TurnUsage, t.ours, d))
}

// onRequestResolved: codex confirms an answered request, or withdraws one
// nobody answered (the turn moved on): the latter closes the approval.
func (a *Adapter) onRequestResolved(p json.RawMessage) {
	var n struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if !a.params("serverRequest/resolved", p, &n) || len(n.RequestID) == 0 {
		return
	}
	key, ok := a.requestKey(n.RequestID)
	if !ok {
		a.anomaly("bad_params", "method", "serverRequest/resolved", "err", "requestId is neither a string nor a number")
		return
	}
	a.mu.Lock()
	ap, open := a.approvals[key]
	delete(a.approvals, key)
	a.mu.Unlock()
	if open {
		a.emit(event.New(event.ApprovalResolved, ap.turnID, event.ApprovalResolvedData{
			RequestID: key, Decision: "cancel", By: "provider", Reason: "withdrawn"}))
	}
}
