package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// ClientVersion is sent as clientInfo.version in initialize.
var ClientVersion = "dev"

type threadResult struct {
	Thread struct {
		ID string `json:"id"`
		// Turns are a resumed thread's past turns, oldest first.
		Turns []struct {
			ID string `json:"id"`
		} `json:"turns"`
	} `json:"thread"`
}

// Start performs the handshake (initialize, initialized) and starts a thread
// (thread/start {cwd}) or resumes Options.ThreadID (thread/resume). A
// resume the provider answers "not found" starts a fresh thread, reports it
// in StartResult.Replaced and emits provider.thread_replaced; any other
// resume failure fails Start and keeps the old thread id. Start is bounded
// by ctx; stdout ending first yields an error wrapping ErrExited.
func (a *Adapter) Start(ctx context.Context) (StartResult, error) {
	var res StartResult
	if a.rt == nil { // a shared runtime did its handshake once
		if err := a.handshake(ctx); err != nil {
			return res, err
		}
	}
	if old := a.o.ThreadID; old != "" {
		if a.rt != nil {
			// Bound before the request: codex tells a resumed thread's
			// status (thread/status/changed) before it answers.
			if err := a.rt.bind(old, a); err != nil {
				return res, fmt.Errorf("resume thread %s: %w", old, err)
			}
		}
		id, err := a.thread(ctx, "thread/resume", map[string]any{"threadId": old})
		if err != nil && a.rt != nil {
			a.rt.release(old, a)
		}
		switch {
		case err == nil:
			res.ThreadID, res.Resumed = id, true
		case isThreadNotFound(err):
			a.log.Warn("thread not found by provider; starting a fresh one", "thread_id", old, "err", err)
			id, serr := a.thread(ctx, "thread/start", map[string]any{"cwd": a.o.Cwd})
			if serr != nil {
				return res, fmt.Errorf("thread %s gone, starting a new one: %w", old, serr)
			}
			res.ThreadID = id
			res.Replaced = &event.ThreadReplacedData{OldThreadID: old, NewThreadID: id, Cause: causeOf(err)}
		default:
			return res, fmt.Errorf("resume thread %s: %w", old, err)
		}
	} else {
		id, err := a.thread(ctx, "thread/start", map[string]any{"cwd": a.o.Cwd})
		if err != nil {
			return res, fmt.Errorf("start thread: %w", err)
		}
		res.ThreadID = id
	}
	a.mu.Lock()
	a.threadID = res.ThreadID
	a.mu.Unlock()
	if res.Replaced != nil {
		a.emit(event.New(event.ProviderThreadReplace, "", res.Replaced))
	}
	return res, nil
}

// handshake is initialize, then the notification initialized.
func (a *Adapter) handshake(ctx context.Context) error {
	initParams := map[string]any{
		"clientInfo":   map[string]any{"name": "sessiond", "title": "sessiond", "version": ClientVersion},
		"capabilities": map[string]any{"experimentalApi": false},
	}
	// Each handshake request waits until the start's deadline, not the
	// request timeout: a slow provider gets the whole start_timeout.
	if _, err := a.requestWithin(ctx, provider.HandshakeWithin(ctx, a.o.RequestTimeout), "initialize", initParams, nil); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if err := a.notify("initialized", nil); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	return nil
}

// thread runs thread/start or thread/resume and returns the thread id. On
// a shared runtime the id is bound to this adapter on the reader
// goroutine, before any later line is routed. A resumed thread's last
// turn is noted there too as the turn that ended last: codex restores
// its usage (thread/tokenUsage/updated naming it) right after the
// answer, and that line must not bind our next turn to it.
func (a *Adapter) thread(ctx context.Context, method string, params any) (string, error) {
	var bindErr error
	bind := func(raw json.RawMessage, rerr *RPCError) {
		var tr threadResult
		if rerr != nil || json.Unmarshal(raw, &tr) != nil || tr.Thread.ID == "" {
			return
		}
		if n := len(tr.Thread.Turns); n > 0 && tr.Thread.Turns[n-1].ID != "" {
			a.mu.Lock()
			a.lastEnded = tr.Thread.Turns[n-1].ID
			a.mu.Unlock()
		}
		if a.rt != nil {
			bindErr = a.rt.bind(tr.Thread.ID, a)
		}
	}
	raw, err := a.requestWithin(ctx, provider.HandshakeWithin(ctx, a.o.RequestTimeout), method, params, bind)
	if err == nil && bindErr != nil {
		return "", fmt.Errorf("provider: %s: %w", method, bindErr)
	}
	if err != nil {
		return "", err
	}
	var tr threadResult
	if err := json.Unmarshal(raw, &tr); err != nil || tr.Thread.ID == "" {
		return "", fmt.Errorf("provider: %s: result has no thread.id: %s", method, truncate(raw, 200))
	}
	return tr.Thread.ID, nil
}

// isThreadNotFound recognizes the provider's "thread not found" answer: a
// typed data.type "threadNotFound", or a message saying "no rollout found"
// or "not found".
func isThreadNotFound(err error) bool {
	var re *RPCError
	if !errors.As(err, &re) {
		return false
	}
	var data struct {
		Type string `json:"type"`
	}
	if len(re.Data) > 0 && json.Unmarshal(re.Data, &data) == nil && data.Type == "threadNotFound" {
		return true
	}
	msg := strings.ToLower(re.Message)
	// "missing source rollout": a process that still has the thread
	// loaded (a shared runtime) once its rollout file was removed.
	return strings.Contains(msg, "no rollout found") || strings.Contains(msg, "not found") ||
		strings.Contains(msg, "missing source rollout")
}

// causeOf is the provider's own wording of an error, for the journal.
func causeOf(err error) string {
	var re *RPCError
	if errors.As(err, &re) {
		return re.Message
	}
	return err.Error()
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
