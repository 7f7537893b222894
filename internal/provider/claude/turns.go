package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// StartTurn writes one `user` message; the turn ends with its `result`.
func (a *Adapter) StartTurn(_ context.Context, turnID, text string) error {
	a.mu.Lock()
	switch {
	case !a.started:
		a.mu.Unlock()
		return fmt.Errorf("turn %s: %w", turnID, provider.ErrNotStarted)
	case a.turn != nil:
		open := a.turn.ours
		a.mu.Unlock()
		return fmt.Errorf("turn %s (open: %s): %w", turnID, open, provider.ErrTurnRunning)
	}
	t := &openTurn{ours: turnID}
	a.turn = t
	sid := a.threadID
	a.mu.Unlock()
	err := a.write(map[string]any{"type": "user", "session_id": sid, "parent_tool_use_id": nil,
		"message": map[string]any{"role": "user", "content": text}})
	if err != nil {
		if !errors.Is(err, provider.ErrStopping) {
			a.mu.Lock()
			if a.turn == t {
				a.turn = nil
			}
			a.mu.Unlock()
		}
		return fmt.Errorf("turn %s: %w", turnID, err)
	}
	return nil
}

// Interrupt sends a control_request {subtype:"interrupt"}; the turn ends
// with the CLI's result, as interrupted (user_cancel). False when no turn
// is open or it ended while we asked.
func (a *Adapter) Interrupt(ctx context.Context) (bool, error) {
	a.mu.Lock()
	t := a.turn
	if t == nil {
		a.mu.Unlock()
		return false, nil
	}
	t.interrupted = true
	a.mu.Unlock()
	// The CLI gets InterruptTimeout to acknowledge (not the whole request
	// timeout: the caller holds the session), and one that never answers
	// is stuck like one that answers and never ends the turn.
	ictx, cancel := context.WithTimeout(ctx, a.o.InterruptTimeout)
	defer cancel()
	if _, err := a.control(ictx, a.o.RequestTimeout, map[string]any{"subtype": "interrupt"}); err != nil {
		a.mu.Lock()
		ended := a.turn != t
		a.mu.Unlock()
		if ended {
			return false, nil
		}
		if ictx.Err() != nil && ctx.Err() == nil || errors.Is(err, provider.ErrTimeout) {
			a.onStuck(t) // the turn ends interrupted; the host stops the child
			return true, nil
		}
		return false, fmt.Errorf("interrupt turn %s: %w", t.ours, err)
	}
	a.mu.Lock()
	if a.turn == t && a.stuck == nil {
		a.stuck = time.AfterFunc(a.o.InterruptTimeout, func() { a.onStuck(t) })
	}
	a.mu.Unlock()
	return true, nil
}

// onStuck: the CLI acknowledged the interrupt of t but has not ended it
// within InterruptTimeout: the turn ends interrupted here (its open
// approvals and items first) and the host is told to stop the child.
func (a *Adapter) onStuck(t *openTurn) {
	a.mu.Lock()
	if a.pause != nil {
		// A live upgrade holds the adapter: the next image (or Resume)
		// arms the timer afresh.
		a.mu.Unlock()
		return
	}
	a.stuck = nil
	if a.turn != t {
		a.mu.Unlock()
		return
	}
	a.turn = nil
	open := a.takeApprovalsLocked(t.ours)
	tools := a.takeToolsLocked()
	a.mu.Unlock()
	a.log.Warn("provider did not end an interrupted turn; stopping it", "turn_id", t.ours, "timeout", a.o.InterruptTimeout)
	for _, k := range open {
		a.emit(event.New(event.ApprovalResolved, t.ours, event.ApprovalResolvedData{
			RequestID: k, Decision: "cancel", By: "daemon", Reason: "turn_ended"}))
	}
	for _, tl := range tools {
		a.emit(event.New(event.ItemCompleted, t.ours, tl.completed(event.ItemInterruptedStatus, "", false)))
	}
	a.emit(event.New(event.TurnCompleted, t.ours, event.TurnCompletedData{Status: event.StatusInterrupted, Reason: event.ReasonUserCancel}))
	if a.o.Stuck != nil {
		a.o.Stuck()
	}
}

// result is the part of a `result` message the adapter reads.
type result struct {
	Subtype   string   `json:"subtype"`
	SessionID string   `json:"session_id"`
	IsError   bool     `json:"is_error"`
	Result    string   `json:"result"`
	Errors    []string `json:"errors"`
	// APIErrorStatus and APIErrorType: the model API's answer that ended
	// the turn (429, "rate_limit_error": ratelimit.go).
	// Raw: a value of another type must not fail the whole result.
	APIErrorStatus json.RawMessage `json:"api_error_status"`
	APIErrorType   json.RawMessage `json:"api_error_type"`
	TotalCostUSD   json.RawMessage `json:"total_cost_usd"` // absent, or not a number: no cost
	Usage          struct {
		InputTokens         int64 `json:"input_tokens"`
		CacheCreation       int64 `json:"cache_creation_input_tokens"`
		CacheRead           int64 `json:"cache_read_input_tokens"`
		OutputTokens        int64 `json:"output_tokens"`
		OutputTokensDetails struct {
			ThinkingTokens int64 `json:"thinking_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

// onResult ends the open turn: turn.usage, then (after cancelling the
// approvals still open and closing its open items) turn.completed.
func (a *Adapter) onResult(line []byte) {
	var r result
	if !a.decode("result", line, &r) {
		a.anomaly("bad_result")
		return
	}
	if a.onStartResult(r.Errors, r.Subtype) {
		return
	}
	a.mu.Lock()
	t := a.turn
	a.turn = nil
	if a.stuck != nil {
		a.stuck.Stop()
		a.stuck = nil
	}
	var open []string
	if t != nil {
		open = a.takeApprovalsLocked(t.ours)
	}
	tools := a.takeToolsLocked()
	a.blocks = map[string]*block{}
	a.denied = map[string]bool{}
	a.mu.Unlock()
	if t == nil {
		a.anomaly("result_outside_turn", "subtype", capText(r.Subtype, 40))
		return
	}
	if r.SessionID != "" && a.ThreadID() == "" {
		// A turn whose system/init never came (or was damaged) still
		// names the conversation: recorded before the turn ends, so the
		// next hold resumes it.
		a.anomaly("session_id_without_init", "session_id", capText(r.SessionID, 60))
		a.onInit(r.SessionID)
	}
	u := r.Usage
	in := u.InputTokens + u.CacheRead + u.CacheCreation
	a.emit(event.New(event.TurnUsage, t.ours, event.TurnUsageData{InputTokens: in, CachedInputTokens: u.CacheRead,
		OutputTokens: u.OutputTokens, ReasoningTokens: u.OutputTokensDetails.ThinkingTokens,
		TotalTokens: in + u.OutputTokens, CostUSD: costOf(r.TotalCostUSD)}))
	for _, k := range open {
		a.emit(event.New(event.ApprovalResolved, t.ours, event.ApprovalResolvedData{
			RequestID: k, Decision: "cancel", By: "daemon", Reason: "turn_ended"}))
	}
	for _, tl := range tools {
		a.emit(event.New(event.ItemCompleted, t.ours, tl.completed(event.ItemInterruptedStatus, "", false)))
	}
	d := event.TurnCompletedData{Status: event.StatusCompleted}
	switch {
	case t.interrupted:
		d.Status, d.Reason = event.StatusInterrupted, event.ReasonUserCancel
	case r.IsError || r.Subtype != "success":
		d.Status, d.Reason = event.StatusFailed, event.ReasonProviderError
		d.Error = strings.Join(r.Errors, "; ")
		if d.Error == "" {
			d.Error = r.Subtype
			if r.Result != "" {
				d.Error = capText(r.Result, 500)
			}
		}
		if limitedResult(&r) {
			d.Reason, d.ResetsAt = event.ReasonRateLimited, a.limitResetsAt(time.Now())
		}
	}
	a.emit(event.New(event.TurnCompleted, t.ours, d))
}

// costOf is total_cost_usd, or nil when the CLI gave none (or no number).
func costOf(raw json.RawMessage) *float64 {
	var f float64
	if len(raw) == 0 || raw[0] == '"' || string(raw) == "null" || json.Unmarshal(raw, &f) != nil {
		return nil
	}
	return &f
}
