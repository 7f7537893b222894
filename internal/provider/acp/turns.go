package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// StartTurn sends session/prompt {sessionId, prompt:[{type:"text"}]}; its
// answer (read on the reader goroutine) ends the turn.
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
	t := &openTurn{ours: turnID, tools: map[string]*tool{}}
	a.turn, a.afterCancel = t, false
	sid := a.threadID
	a.mu.Unlock()
	key, err := a.send("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}},
		&call{onResult: func(r json.RawMessage, rerr *RPCError) { a.endTurn(t, r, rerr) }})
	a.mu.Lock()
	t.promptID = key // (a Pause before this refuses: the prompt looks like any request in flight)
	a.mu.Unlock()
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

// Interrupt sends session/cancel and answers the turn's pending
// permission requests {outcome:"cancelled"} (as ACP requires); the turn
// ends with the prompt's answer (stopReason cancelled), interrupted
// (user_cancel). An agent that does not end it within InterruptTimeout is
// stuck: the turn ends here and the host stops the child.
func (a *Adapter) Interrupt(_ context.Context) (bool, error) {
	a.answerMu.Lock() // a Respond writing selected finishes first (permission.go)
	defer a.answerMu.Unlock()
	a.mu.Lock()
	t := a.turn
	if t == nil {
		a.mu.Unlock()
		return false, nil
	}
	t.interrupted = true
	sid := a.threadID
	a.mu.Unlock()
	var err error
	if a.hung.Load() {
		err = fmt.Errorf("provider: session/cancel: the agent does not read its stdin: %w", provider.ErrTimeout)
	} else {
		err = a.notifyWithin(a.o.InterruptTimeout, "session/cancel", map[string]any{"sessionId": sid})
	}
	a.cancelApprovals(t.ours, "turn_cancelled")
	// Armed even when session/cancel could not be written: the agent
	// cannot end the turn then, so it ends here after InterruptTimeout and
	// the host stops the child, as for an agent that ignores the cancel.
	a.mu.Lock()
	if a.turn == t && a.stuck == nil {
		a.stuck = time.AfterFunc(a.o.InterruptTimeout, func() { a.onStuck(t) })
	}
	a.mu.Unlock()
	if err != nil {
		return true, fmt.Errorf("interrupt turn %s: %w", t.ours, err)
	}
	return true, nil
}

// onStuck: the agent got session/cancel for t and has not answered its
// prompt within InterruptTimeout: the turn ends interrupted here and the
// host is told to stop the child.
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
	a.turn, a.afterCancel = nil, true
	ds := a.closeItemsLocked(t)
	a.mu.Unlock()
	a.log.Warn("agent did not end a cancelled turn; stopping it", "turn_id", t.ours, "timeout", a.o.InterruptTimeout)
	a.cancelApprovals(t.ours, "turn_ended")
	for _, d := range ds {
		a.emit(d)
	}
	a.emit(event.New(event.TurnCompleted, t.ours, event.TurnCompletedData{Status: event.StatusInterrupted, Reason: event.ReasonUserCancel}))
	if a.o.Stuck != nil {
		a.o.Stuck()
	}
}

// promptResult is session/prompt's answer.
type promptResult struct {
	StopReason string `json:"stopReason"`
	Usage      *struct {
		InputTokens       int64 `json:"inputTokens"`
		OutputTokens      int64 `json:"outputTokens"`
		TotalTokens       int64 `json:"totalTokens"`
		ThoughtTokens     int64 `json:"thoughtTokens"`
		CachedReadTokens  int64 `json:"cachedReadTokens"`
		CachedWriteTokens int64 `json:"cachedWriteTokens"`
	} `json:"usage"`
}

// endTurn: the prompt's answer ends t: its open items and text close,
// turn.usage when the answer carries usage, its open approvals are
// cancelled, then turn.completed by stopReason (tables.go).
func (a *Adapter) endTurn(t *openTurn, raw json.RawMessage, rerr *RPCError) {
	var r promptResult
	if rerr == nil {
		if ok, _ := provider.Decode(raw, &r); !ok {
			a.anomaly("bad_prompt_result", "result", capText(string(raw), 120))
		}
	}
	a.mu.Lock()
	if a.turn != t {
		a.mu.Unlock()
		return // ended already (stuck)
	}
	a.turn, a.afterCancel = nil, t.interrupted
	if a.stuck != nil {
		a.stuck.Stop()
		a.stuck = nil
	}
	ds := a.closeItemsLocked(t)
	a.mu.Unlock()
	for _, d := range ds {
		a.emit(d)
	}
	if u := r.Usage; u != nil {
		a.emit(event.New(event.TurnUsage, t.ours, event.TurnUsageData{InputTokens: u.InputTokens, CachedInputTokens: u.CachedReadTokens,
			OutputTokens: u.OutputTokens, ReasoningTokens: u.ThoughtTokens, TotalTokens: u.TotalTokens}))
	}
	a.cancelApprovals(t.ours, "turn_ended")
	a.emit(event.New(event.TurnCompleted, t.ours, a.completion(t, r.StopReason, rerr)))
}

// completion is turn.completed's data for the prompt's answer.
func (a *Adapter) completion(t *openTurn, stop string, rerr *RPCError) event.TurnCompletedData {
	// The stopReason is the agent's to choose: journaled as a name
	// (agentName: cut, control characters escaped).
	d := event.TurnCompletedData{Status: event.StatusCompleted, StopReason: agentName(stop)}
	switch {
	case rerr != nil && t.interrupted:
		// Some agents answer a cancelled prompt with an error.
		d.Status, d.Reason = event.StatusInterrupted, event.ReasonUserCancel
	case rerr != nil:
		d.Status, d.Reason, d.Error = event.StatusFailed, event.ReasonProviderError, capText(rerr.Error(), 1000)
	default:
		switch stopReasons[stop] {
		case stopCompleted:
		case stopCancelled:
			d.Status = event.StatusInterrupted
			switch {
			case t.interrupted:
				d.Reason = event.ReasonUserCancel
			case t.denied:
				d.Reason = event.ReasonApprovalDenied
			}
		default:
			a.anomaly("unknown_stop_reason", "stopReason", capText(stop, 60), "bytes", len(stop))
			d.Status, d.Reason = event.StatusFailed, event.ReasonProviderError
			d.Error = "the agent ended the turn with unknown stopReason " + capText(fmt.Sprintf("%q", stop), 80)
		}
	}
	return d
}
