package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

type turnResult struct {
	Turn struct {
		ID string `json:"id"`
	} `json:"turn"`
}

// StartTurn sends turn/start with text on the thread and binds the
// provider's turn id to turnID (ours): every event of the turn carries
// TurnID = turnID and data.providerTurnId. On error no turn is open and
// nothing was emitted for it (unless it is ErrStopping: the turn then stays
// open for what the provider still writes); completing it in the journal is
// the caller's.
func (a *Adapter) StartTurn(ctx context.Context, turnID, text string) error {
	a.mu.Lock()
	switch {
	case a.threadID == "":
		a.mu.Unlock()
		return fmt.Errorf("turn %s: %w", turnID, ErrNotStarted)
	case a.turn != nil:
		open := a.turn.ours
		a.mu.Unlock()
		return fmt.Errorf("turn %s (open: %s): %w", turnID, open, ErrTurnRunning)
	}
	t := &openTurn{ours: turnID}
	a.turn = t
	thread := a.threadID
	a.mu.Unlock()

	params := map[string]any{
		"threadId": thread,
		"input":    []map[string]any{{"type": "text", "text": text}},
	}
	// Bind on the reader goroutine, before the lines after the response.
	bind := func(raw json.RawMessage, rerr *RPCError) {
		var tr turnResult
		if rerr != nil || json.Unmarshal(raw, &tr) != nil || tr.Turn.ID == "" {
			return
		}
		a.mu.Lock()
		if a.turn == t && t.provider == "" {
			t.provider = tr.Turn.ID
		}
		a.mu.Unlock()
	}
	if _, err := a.request(ctx, "turn/start", params, bind); err != nil {
		// Abandoned because the provider is being stopped: the turn stays
		// open, so what the provider wrote for it is still emitted while it
		// drains, and the host's teardown completes it.
		if !errors.Is(err, ErrStopping) {
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

// Interrupt asks the provider to interrupt the open turn (turn/interrupt).
// It reports false when no turn is open, or when the turn completed on its
// own before the provider answered (refusing the interrupt). The turn ends later with the
// provider's turn/completed, emitted with reason user_cancel.
func (a *Adapter) Interrupt(ctx context.Context) (bool, error) {
	a.mu.Lock()
	t := a.turn
	if t == nil {
		a.mu.Unlock()
		return false, nil
	}
	t.interrupted = true
	params := map[string]any{"threadId": a.threadID, "turnId": t.provider}
	a.mu.Unlock()
	// codex gets InterruptTimeout to answer (the host's step_timeout: the
	// caller holds the session), not the whole request timeout.
	ctx, cancel := context.WithTimeoutCause(ctx, a.o.InterruptTimeout, fmt.Errorf("no answer within %s: %w", a.o.InterruptTimeout, ErrTimeout))
	defer cancel()
	if _, err := a.request(ctx, "turn/interrupt", params, nil); err != nil {
		var re *RPCError
		a.mu.Lock()
		ended := a.turn != t
		a.mu.Unlock()
		if ended && errors.As(err, &re) {
			// The turn completed on its own while we asked: nothing to cancel.
			return false, nil
		}
		return false, fmt.Errorf("interrupt turn %s: %w", t.ours, err)
	}
	return true, nil
}
