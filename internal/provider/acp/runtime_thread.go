package acp

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sessiond/sessiond/internal/provider"
)

// A thread's side of a shared runtime: its view of the runtime's stdin,
// Detach and Silence (provider.Thread).

// threadStdin is one thread's view of the runtime's stdin: cancelling it
// (the session is being torn down) fails that thread's writes only; a
// write waiting behind other threads' writes gives up at its Cancel.
type threadStdin struct {
	s         *provider.Stdin
	stop      chan struct{} // closed by Cancel
	cancelled atomic.Bool
}

func (t *threadStdin) WriteLine(b []byte) error {
	if t.cancelled.Load() {
		return fmt.Errorf("provider: write stdin: %w", provider.ErrStopping)
	}
	return t.s.WriteLineAbort(b, t.s.Timeout(), t.stop)
}

func (t *threadStdin) Cancel() bool {
	if t.cancelled.Swap(true) {
		return false
	}
	close(t.stop)
	return true
}

// Detach stops the session's events. The answers already queued for the
// agent (a cancelled turn's permissions) are written first; then, when
// the agent serves session/close, the session is closed there (the agent
// cancels its work and frees it; it can be loaded again later); an agent
// without it keeps the session loaded until it exits (ACP has no other
// unsubscribe). Then nothing of the session reaches this thread, and its
// requests still waiting fail. All of it is bounded by ctx.
func (a *Adapter) Detach(ctx context.Context) error {
	if a.rt == nil {
		return nil
	}
	a.Silence()
	err := a.flushAnswers(ctx)
	sid := a.ThreadID()
	a.rt.mu.Lock()
	canClose := a.rt.canClose
	a.rt.mu.Unlock()
	if err == nil && canClose && sid != "" {
		if _, cerr := a.request(ctx, "session/close", map[string]any{"sessionId": sid}, nil); cerr != nil {
			err = fmt.Errorf("session/close: %w", cerr)
		} else {
			a.log.Debug("ACP session closed in the agent", "acp_session_id", agentName(sid))
		}
	}
	if errors.Is(err, provider.ErrExited) || errors.Is(err, provider.ErrStopping) {
		err = nil // the runtime is gone or going: nothing to write to
	}
	a.rt.unbind(a)
	a.finish()
	if err != nil {
		return fmt.Errorf("detach session %s: %w", agentName(sid), err)
	}
	return nil
}

// Silence stops emitting now (the runtime goes on routing the session's
// lines here, to nobody): what the session journals from here on is the
// host's.
func (a *Adapter) Silence() {
	a.mu.Lock()
	if a.stuck != nil {
		a.stuck.Stop()
	}
	a.mu.Unlock()
	a.emitMu.Lock()
	a.stopped = true
	a.emitMu.Unlock()
}

var _ provider.Thread = (*Adapter)(nil)
