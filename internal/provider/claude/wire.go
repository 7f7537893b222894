package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/provider"
)

// inbound is any line the CLI writes; fields are read per type.
type inbound struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	SessionID       string          `json:"session_id"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	Event           json.RawMessage `json:"event"`      // stream_event
	Message         json.RawMessage `json:"message"`    // assistant, user
	RequestID       json.RawMessage `json:"request_id"` // a string; a number is answered too
	Request         json.RawMessage `json:"request"`    // control_request
	Response        json.RawMessage `json:"response"`   // control_response
}

// controlResponse is the inner response of a control_response.
type controlResponse struct {
	Subtype   string          `json:"subtype"` // success | error
	RequestID string          `json:"request_id"`
	Response  json.RawMessage `json:"response"`
	Error     string          `json:"error"`
}

// write sends one message as a line.
func (a *Adapter) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("provider: marshal: %w", err)
	}
	return a.stdin.WriteLine(append(b, '\n'))
}

// control sends a control_request and waits for its control_response,
// wait (the request timeout; 0 for the handshake: until ctx's deadline),
// BeginStop, the CLI's exit or ctx.
func (a *Adapter) control(ctx context.Context, wait time.Duration, request map[string]any) (json.RawMessage, error) {
	ch := make(chan controlResponse, 1)
	a.mu.Lock()
	a.nextID++
	id := "sessiond_" + strconv.FormatInt(a.nextID, 10)
	a.calls[id] = ch
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.calls, id)
		a.mu.Unlock()
	}()
	sub, _ := request["subtype"].(string)
	b, err := json.Marshal(map[string]any{"type": "control_request", "request_id": id, "request": request})
	if err != nil {
		return nil, fmt.Errorf("provider: marshal: %w", err)
	}
	within := wait
	if dl, ok := ctx.Deadline(); ok {
		within = time.Until(dl) // a caller with less time (an interrupt) waits no longer on a CLI not reading
	}
	if err := a.stdin.WriteLineWithin(append(b, '\n'), within); err != nil {
		return nil, fmt.Errorf("provider: %s: %w", sub, err)
	}
	timeout, stop := provider.Timer(wait)
	defer stop()
	answer := func(r controlResponse) (json.RawMessage, error) {
		if r.Subtype != "success" {
			return nil, fmt.Errorf("provider: %s: %s", sub, capText(r.Error, 300))
		}
		return r.Response, nil
	}
	select {
	case r := <-ch:
		return answer(r)
	case <-a.done:
		select {
		case r := <-ch:
			return answer(r)
		default:
		}
		return nil, fmt.Errorf("provider: %s: %w", sub, provider.ErrExited)
	case <-a.stopping:
		return nil, fmt.Errorf("provider: %s: %w", sub, provider.ErrStopping)
	case <-timeout:
		return nil, fmt.Errorf("provider: %s after %s: %w", sub, wait.Round(time.Millisecond), provider.ErrTimeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("provider: %s: %w", sub, context.Cause(ctx))
	}
}

// respond writes a control_response to one of the CLI's requests
// (requestID is its request_id as the CLI sent it).
func (a *Adapter) respond(requestID json.RawMessage, response any) error {
	return a.write(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": requestID, "response": response}})
}

// respondError answers one of the CLI's requests with an error.
func (a *Adapter) respondError(requestID json.RawMessage, msg string) error {
	return a.write(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "error", "request_id": requestID, "error": msg}})
}

func (a *Adapter) onControlResponse(m *inbound) {
	var r controlResponse
	if !a.decode("control_response", m.Response, &r) || r.RequestID == "" {
		a.anomaly("bad_control_response")
		return
	}
	a.mu.Lock()
	ch, ok := a.calls[r.RequestID]
	delete(a.calls, r.RequestID)
	a.mu.Unlock()
	if !ok {
		a.anomaly("control_response_unknown_id", "request_id", capText(r.RequestID, 60))
		return
	}
	ch <- r
}

// decode unmarshals data (a message, or part of one, named what) into v.
// A field of the wrong type is left zero and logged, the rest is read:
// a damaged field must not cost a whole message (a request the CLI waits
// on, the result that ends a turn). False for data that is not JSON.
func (a *Adapter) decode(what string, data []byte, v any) bool {
	ok, bad := provider.Decode(data, v)
	if bad != nil {
		a.anomaly("bad_field", "message", what, "field", capText(bad.Field, 60), "value", bad.Value)
	}
	return ok
}

// capText cuts s to at most n bytes on a rune boundary.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
