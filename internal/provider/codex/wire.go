package codex

import (
	"encoding/json"
	"fmt"

	"github.com/sessiond/sessiond/internal/provider"
)

// message is any line of the wire: a request (id+method), a notification
// (method only) or a response (id + result|error). Unknown fields, including
// "jsonrpc", are ignored.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}

func (m *message) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// RPCError is a JSON-RPC error object, as the provider answered it.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// UnmarshalJSON reads an error object leniently (a field of the wrong
// type is left zero); an error that is no object at all is kept as the
// message of an internal error, so the call it answers still fails
// with it instead of waiting for an answer that came.
func (e *RPCError) UnmarshalJSON(b []byte) error {
	type plain RPCError
	var p plain
	if ok, _ := provider.Decode(b, &p); ok && len(b) > 0 && b[0] == '{' {
		*e = RPCError(p)
		return nil
	}
	*e = RPCError{Code: codeInternalError, Message: "malformed error: " + errorText(b)}
	return nil
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("provider error %d: %s", e.Code, e.Message)
}

// codeMethodNotFound answers a server request the adapter does not know.
const codeMethodNotFound = -32601

// codeInternalError stands for an error response that was no error object.
const codeInternalError = -32603

// requestKey is the requestId clients see for a provider request id
// (provider.RequestKey: ids of different types stay apart); false when
// raw is neither a string nor a number.
func (a *Adapter) requestKey(raw json.RawMessage) (string, bool) {
	k, ok := provider.RequestKey(raw)
	return a.o.RequestIDPrefix + k, ok
}

// write sends one message as a line. Write failures wrap ErrExited.
func (a *Adapter) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("provider: marshal: %w", err)
	}
	b = append(b, '\n')
	return a.stdin.WriteLine(b)
}

// CancelWrites makes the write in progress (one blocked on a provider that
// stopped reading, or on a stdin a descendant of an exited child still
// holds) and every later write return ErrStopping at once. Requests already
// written still wait for their answer: a child that exited may have written
// it before, and the reader delivers it or reaches EOF. Stdin stays open:
// closing it is the close ladder's first step.
func (a *Adapter) CancelWrites() {
	a.stdin.Cancel()
}

// BeginStop tells the adapter its live provider is being stopped:
// CancelWrites, and every request waiting for its answer returns
// ErrStopping at once. The host calls it before it takes the session lock
// to stop the child, so a close never waits behind a send. The reader goes
// on, so what the provider still writes is journaled by the drain step (an
// open turn stays open for it; the teardown completes it).
func (a *Adapter) BeginStop() {
	a.CancelWrites()
	a.stopOnce.Do(func() { close(a.stopping) })
}

type outRequest struct {
	ID     int64  `json:"id"`
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

type outNotification struct {
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

type outResult struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result"`
}

type outError struct {
	ID    json.RawMessage `json:"id"`
	Error RPCError        `json:"error"`
}
