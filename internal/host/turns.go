package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// liveEntry locks and returns the entry of a session with a live child, or
// session_not_live. The caller unlocks.
func (h *Host) liveEntry(ctx context.Context, id string) (*entry, error) {
	if _, err := h.record(id); err != nil {
		return nil, err
	}
	e, err := h.lockEntry(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, &api.Error{Kind: api.KindSessionNotLive, Msg: "session " + id + " has no live provider: hold it first"}
	}
	h.mu.Lock()
	ok := e.state == StateLive && e.adapter != nil
	h.mu.Unlock()
	if !ok {
		e.mu.Unlock()
		return nil, &api.Error{Kind: api.KindSessionNotLive, Msg: "session " + id + " has no live provider: hold it first"}
	}
	return e, nil
}

// Send starts a turn. The turn.started row is committed before anything is
// written to the provider; a repeated clientMessageId returns the original
// turn and sends nothing.
func (h *Host) Send(ctx context.Context, p api.SendParams) (api.SendResult, error) {
	if _, err := h.record(p.SessionID); err != nil {
		return api.SendResult{}, err
	}
	if tid, ok, err := h.lookupClientMessage(p); ok || err != nil {
		return api.SendResult{TurnID: tid, Duplicate: ok}, err
	}
	e, err := h.liveEntry(ctx, p.SessionID)
	if err != nil {
		return api.SendResult{}, err
	}
	defer e.mu.Unlock()
	if tid, ok, err := h.lookupClientMessage(p); ok || err != nil { // re-check under the session lock
		return api.SendResult{TurnID: tid, Duplicate: ok}, err
	}
	if err := e.sink.Drain(ctx); err != nil {
		return api.SendResult{}, fmt.Errorf("session %s: %w", e.id, err)
	}
	if err := h.storeWritable(ctx, e.id); err != nil {
		return api.SendResult{}, err
	}
	if e.rec.PendingSwitch != nil && h.j.State(e.id).OpenTurn == "" {
		// The turn it waited for ended: the queued switch goes first.
		cur := h.applyPendingLocked(ctx, e, h.o.Providers[e.rec.Provider], false)
		if cur != e {
			if cur == nil {
				return api.SendResult{}, &api.Error{Kind: api.KindSessionNotLive, Msg: "session " + p.SessionID + " has no live provider after its queued account switch failed: hold it again"}
			}
			defer cur.mu.Unlock()
			e = cur
		}
		h.mu.Lock()
		live := e.state == StateLive && e.adapter != nil
		h.mu.Unlock()
		if !live {
			return api.SendResult{}, &api.Error{Kind: api.KindSessionNotLive, Msg: "session " + p.SessionID + " has no live provider after its queued account switch: hold it again"}
		}
	}
	return h.sendLocked(ctx, e, p, "")
}

// sendLocked starts a turn on e (idle, live): turn.started (with retryOf
// when it sends a rate-limited turn's prompt again) is committed before
// anything goes to the provider; a session whose portable switch left it
// a fresh thread sends its completed history ahead of the text (once).
// Needs the session lock.
func (h *Host) sendLocked(ctx context.Context, e *entry, p api.SendParams, retryOf string) (api.SendResult, error) {
	if st := h.j.State(e.id); st.OpenTurn != "" {
		return api.SendResult{}, &api.Error{Kind: api.KindTurnRunning, Msg: "session " + e.id + ": turn " + st.OpenTurn + " is running",
			Data: map[string]any{"turnId": st.OpenTurn}}
	}
	text := p.Text
	if e.rec.Portable {
		hist, err := h.portableHistory(e.id)
		if err != nil {
			return api.SendResult{}, fmt.Errorf("session %s: portable history: %w", e.id, err)
		}
		text = hist + text
	}
	turnID := newID("t_")
	if _, err := e.sink.Commit(ctx, event.New(event.TurnStarted, turnID, event.TurnStartedData{
		TurnID: turnID, Text: p.Text, ClientMessageID: p.ClientMessageID, Origin: p.Origin, RetryOf: retryOf})); err != nil {
		return api.SendResult{}, fmt.Errorf("session %s: journal turn.started: %w", e.id, err)
	}
	h.count(func(c *counters) { c.sends++ })
	// The write-ahead row is committed: the turn must reach the provider
	// even if the caller goes away now (the adapter bounds the wait).
	err := e.adapter.StartTurn(context.WithoutCancel(ctx), turnID, text)
	if err == nil && e.rec.Portable {
		h.portableSent(e)
	}
	if err != nil {
		if errors.Is(err, provider.ErrExited) || (errors.Is(err, provider.ErrStopping) && loadedStateLocked(e, StateLive) == StateExited) {
			// The child is gone (its exit may have cancelled the write):
			// its teardown completes the turn interrupted.
			return api.SendResult{TurnID: turnID}, nil
		}
		perr := h.providerError(providerCall{session: e.id, op: opSend, turnID: turnID}, err)
		if api.KindOf(perr) == api.KindProviderFailed {
			if _, cerr := e.sink.Commit(context.WithoutCancel(ctx), event.New(event.TurnCompleted, turnID,
				event.TurnCompletedData{Status: event.StatusFailed, Reason: event.ReasonProviderError, Error: err.Error()})); cerr != nil {
				h.log.Error("journal failed turn", "session_id", e.id, "turn_id", turnID, "err", cerr)
			}
		}
		return api.SendResult{}, perr
	}
	return api.SendResult{TurnID: turnID}, nil
}

// lookupClientMessage finds the turn a send's clientMessageId started. A
// lookup that fails fails the send: taking the message for a new one could
// send it twice.
func (h *Host) lookupClientMessage(p api.SendParams) (string, bool, error) {
	if p.ClientMessageID == "" {
		return "", false, nil
	}
	tid, ok, err := h.j.LookupClientMessage(p.SessionID, p.ClientMessageID)
	if err != nil {
		h.log.Error("send refused: clientMessageId lookup failed", "session_id", p.SessionID, "err", err)
		return "", false, fmt.Errorf("send: %w", err)
	}
	return tid, ok, nil
}

// errNoAnswer ends a cancel's wait for the session at step_timeout.
var errNoAnswer = errors.New("step_timeout passed")

// Cancel interrupts the running turn. It waits at most step_timeout for
// the session (a send blocked writing to a child that stopped reading
// holds it), and the adapter waits at most step_timeout for the
// provider's answer (provider.Options.InterruptTimeout; claude then
// stops a CLI that never answers itself): a stopped or hung provider is
// provider_failed naming the bound and the fix, not an answer after the
// adapter's own 30 s. The turn then stays open: the provider never said
// it ended, and a close does end it.
func (h *Host) Cancel(ctx context.Context, id string) (api.CancelResult, error) {
	lctx, stop := context.WithTimeoutCause(ctx, h.o.StepTimeout, errNoAnswer)
	defer stop()
	e, err := h.liveEntry(lctx, id)
	if err != nil {
		if errors.Is(context.Cause(lctx), errNoAnswer) {
			h.mu.Lock()
			ent := h.sessions[id]
			live := ent != nil && ent.state == StateLive
			h.mu.Unlock()
			if !live { // a hold still starting its child, an eviction: no turn to cancel yet
				return api.CancelResult{}, &api.Error{Kind: api.KindSessionNotLive, Msg: "session " + id + " has no live provider yet (starting or stopping)", Err: err}
			}
			return api.CancelResult{}, h.noAnswer(id, "another call on the session (a send writing to the provider?) did not end", err)
		}
		return api.CancelResult{}, err
	}
	defer e.mu.Unlock()
	if err := h.storeWritable(ctx, id); err != nil {
		return api.CancelResult{}, err
	}
	ok, err := e.adapter.Interrupt(ctx)
	if err != nil {
		return api.CancelResult{}, h.providerError(providerCall{session: id, op: opInterrupt}, err)
	}
	return api.CancelResult{Cancelled: ok}, nil
}

// noAnswer is a cancel's provider_failed when step_timeout passed.
func (h *Host) noAnswer(id, what string, err error) error {
	msg := fmt.Sprintf("session %s: %s within step_timeout (%s): the provider may be stopped or hung; agentSession.close stops it",
		id, what, h.o.StepTimeout)
	h.log.Warn("cancel unanswered", "session_id", id, "step_timeout", h.o.StepTimeout.String(), "err", err)
	return &api.Error{Kind: api.KindProviderFailed, Msg: msg, Err: err,
		Data: map[string]any{"cause": msg, "stepTimeoutMs": h.o.StepTimeout.Milliseconds()}}
}

// Respond answers a pending approval.
func (h *Host) Respond(ctx context.Context, p api.RespondParams) error {
	e, err := h.liveEntry(ctx, p.SessionID)
	if err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := h.storeWritable(ctx, p.SessionID); err != nil {
		return err
	}
	err = e.adapter.Respond(ctx, p.RequestID, provider.Answer{Decision: p.Decision, Answers: p.Answers, Content: p.Content, Origin: p.Origin})
	if err != nil {
		return h.providerError(providerCall{session: p.SessionID, op: opRespond, requestID: p.RequestID, decision: p.Decision}, err)
	}
	return nil
}

// storeWritable refuses a call that would act on the provider while the
// store refuses writes (journal.Writable): what the provider did in reply
// could only be held in memory, and lost with it, so the call answers
// store_unavailable and the provider never hears of it.
func (h *Host) storeWritable(ctx context.Context, id string) error {
	if err := h.j.Writable(ctx); err != nil {
		return fmt.Errorf("session %s: the store refuses writes, nothing was sent to the provider: %w", id, err)
	}
	return nil
}

// busyLocked reports a running turn or a pending approval. Needs the session lock.
func (h *Host) busyLocked(e *entry) bool {
	if e.adapter != nil && e.adapter.Busy() {
		return true
	}
	st := h.j.State(e.id)
	return st.OpenTurn != "" || len(st.PendingApprovals) > 0
}
