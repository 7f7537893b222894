package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/provider"
)

// message is any line of the wire: a request (id+method), a notification
// (method only) or a response (id + result|error).
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}

func (m *message) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// RPCError is a JSON-RPC error object, as the agent answered it.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// UnmarshalJSON reads an error leniently: one that is no object is kept
// as the message of an internal error, so the call still fails with it.
func (e *RPCError) UnmarshalJSON(b []byte) error {
	type plain RPCError
	var p plain
	if ok, _ := provider.Decode(b, &p); ok && len(b) > 0 && b[0] == '{' {
		*e = RPCError(p)
		return nil
	}
	*e = RPCError{Code: codeInternalError, Message: "malformed error: " + capText(string(b), 200)}
	return nil
}

// maxErrorMessageBytes bounds the agent's error message wherever it is
// shown (a failed start or turn, the log): the agent chooses its length.
const maxErrorMessageBytes = 1024

func (e *RPCError) Error() string {
	msg := capText(e.Message, maxErrorMessageBytes)
	if len(msg) < len(e.Message) {
		msg += fmt.Sprintf(" … (%d bytes)", len(e.Message))
	}
	s := fmt.Sprintf("agent error %d: %s", e.Code, msg)
	if len(e.Data) > 0 && string(e.Data) != "null" {
		s += " (" + capText(string(e.Data), 300) + ")"
	}
	return s
}

// JSON-RPC and ACP error codes.
const (
	codeInvalidRequest   = -32600
	codeInvalidParams    = -32602
	codeMethodNotFound   = -32601
	codeInternalError    = -32603
	codeResourceNotFound = -32002
)

type outRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type outNotification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type outResult struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result"`
}

type outError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   RPCError        `json:"error"`
}

// write sends one message as a line. Write failures wrap ErrExited.
func (a *Adapter) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("provider: marshal: %w", err)
	}
	return a.stdin.WriteLine(append(b, '\n'))
}

// call is one of our requests waiting for its response.
type call struct {
	method string
	// onResult, when set, runs on the reader goroutine as the response is
	// read, before any later line is handled.
	onResult func(result json.RawMessage, rerr *RPCError)
	resp     chan *message // buffered 1; nil: nobody waits (session/prompt)
}

// send writes a request and registers its call; the id is returned.
func (a *Adapter) send(method string, params any, c *call) (string, error) {
	c.method = method
	var id int64
	if a.rt != nil {
		id = a.rt.nextID(a) // one id space per runtime; the answer comes back to a
	}
	a.mu.Lock()
	if a.rt == nil {
		a.nextID++
		id = a.nextID
	}
	key := strconv.FormatInt(id, 10)
	a.calls[key] = c
	a.mu.Unlock()
	select {
	case <-a.done:
		a.forget(key)
		return key, fmt.Errorf("provider: %s: %s: %w", method, stdoutEnded, provider.ErrExited)
	default:
	}
	if err := a.write(outRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params}); err != nil {
		a.forget(key)
		return key, fmt.Errorf("provider: %s: %w", method, err)
	}
	return key, nil
}

func (a *Adapter) forget(key string) {
	a.mu.Lock()
	delete(a.calls, key)
	a.mu.Unlock()
	if a.rt != nil {
		a.rt.forgetID(key) // answered or abandoned: the id leaves the runtime's space
	}
}

// stdoutEnded is why a request fails once the reader ended: the agent
// exited, or closed its stdout and may run on (the host stops it).
const stdoutEnded = "the agent's stdout ended (it exited or closed it)"

// request sends method and waits for its response, ctx, the request
// timeout, BeginStop or the agent's exit. An error answer is *RPCError.
func (a *Adapter) request(ctx context.Context, method string, params any, onResult func(json.RawMessage, *RPCError)) (json.RawMessage, error) {
	c := &call{onResult: onResult, resp: make(chan *message, 1)}
	key, err := a.send(method, params, c)
	if err != nil {
		return nil, err
	}
	defer a.forget(key)
	answered := func(m *message) (json.RawMessage, error) {
		if m.Error != nil {
			return nil, fmt.Errorf("provider: %s: %w", method, m.Error)
		}
		return m.Result, nil
	}
	t := time.NewTimer(a.o.RequestTimeout)
	defer t.Stop()
	select {
	case m := <-c.resp:
		return answered(m)
	case <-a.done:
		select {
		case m := <-c.resp: // read just before the reader stopped
			return answered(m)
		default:
		}
		return nil, fmt.Errorf("provider: %s: %s before its answer: %w", method, stdoutEnded, provider.ErrExited)
	case <-a.stopping:
		select {
		case m := <-c.resp: // answered just before
			return answered(m)
		default:
		}
		return nil, fmt.Errorf("provider: %s: %w", method, provider.ErrStopping)
	case <-t.C:
		return nil, fmt.Errorf("provider: the agent did not answer %s within %s: %w", method, a.o.RequestTimeout, provider.ErrTimeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("provider: the agent did not answer %s: %w", method, context.Cause(ctx))
	}
}

// notify sends a notification.
func (a *Adapter) notify(method string, params any) error {
	if err := a.write(outNotification{JSONRPC: "2.0", Method: method, Params: params}); err != nil {
		return fmt.Errorf("provider: %s: %w", method, err)
	}
	return nil
}

// notifyWithin is notify waiting at most d: a write to the agent's stdin
// in progress (an answer it does not read) holds the stdin for up to the
// request timeout, and a cancel must not wait that long. The write goes on
// in the background, bounded by that timeout (or BeginStop).
func (a *Adapter) notifyWithin(d time.Duration, method string, params any) error {
	done := make(chan error, 1)
	go func() { done <- a.notify(method, params) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("provider: %s: not written within %s (the agent does not read its stdin): %w", method, d, provider.ErrTimeout)
	}
}

// answer queues a reply to a request of the agent for writeLoop, never
// waiting on the agent's stdin (the reader calls it). A full queue (by
// count or bytes) means the agent has stopped reading: it is hung, and
// the host is told to stop it (Options.Stuck), once.
func (a *Adapter) answer(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		a.log.Warn("marshal answer", "err", err)
		return
	}
	if a.hung.Load() {
		return
	}
	line := append(b, '\n')
	n := int64(len(line))
	if q := a.queuedBytes.Add(n); q <= maxQueuedAnswerBytes || q == n { // one answer over the bound goes alone
		select {
		case a.answers <- queued{line: line}:
			return
		default:
		}
	}
	a.queuedBytes.Add(-n)
	a.setHung("queue_full")
}

// setHung marks the agent hung (it does not read its stdin) and tells the
// host to stop it (Options.Stuck), once: the answers' queue is full, or
// an answer could not be written within the request timeout (the agent
// may then hold part of a line: nothing more can be written after it).
func (a *Adapter) setHung(cause string) {
	if a.hung.Swap(true) {
		return
	}
	a.log.Warn("the agent does not read its stdin; stopping it", "cause", cause, "queued_answers", len(a.answers),
		"queued_bytes", a.queuedBytes.Load(), "max_answers", maxQueuedAnswers, "max_bytes", maxQueuedAnswerBytes)
	if a.o.Stuck != nil {
		a.o.Stuck()
	}
}

// queued is a line for writeLoop, or (line nil) a barrier it closes once
// every line before it was written.
type queued struct {
	line    []byte
	flushed chan struct{}
}

// writeLoop writes the queued answers in order until the reader ended.
// Once the agent is hung the rest are dropped: each would hold the stdin
// for the request timeout, and session/cancel behind it.
func (a *Adapter) writeLoop() {
	for {
		select {
		case q := <-a.answers:
			if q.line == nil {
				close(q.flushed)
				continue
			}
			if !a.hung.Load() {
				if err := a.stdin.WriteLine(q.line); err != nil {
					a.log.Debug("answer agent request", "err", err)
					if errors.Is(err, provider.ErrTimeout) {
						a.setHung("answer_not_read")
					}
				}
			}
			a.queuedBytes.Add(-int64(len(q.line)))
		case <-a.done:
			return
		}
	}
}

// flushAnswers waits until every answer queued so far is written.
func (a *Adapter) flushAnswers(ctx context.Context) error {
	q := queued{flushed: make(chan struct{})}
	select {
	case a.answers <- q:
	case <-a.done:
		return provider.ErrExited
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case <-q.flushed:
		return nil
	case <-a.done:
		return provider.ErrExited
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// respondAsync answers a request of the agent through the queue.
func (a *Adapter) respondAsync(id json.RawMessage, result any) {
	a.answer(outResult{JSONRPC: "2.0", ID: id, Result: result})
}

// respondErrorAsync answers a request of the agent with an error through
// the queue.
func (a *Adapter) respondErrorAsync(id json.RawMessage, code int, msg string) {
	a.answer(outError{JSONRPC: "2.0", ID: id, Error: RPCError{Code: code, Message: msg}})
}

// respond answers a request of the agent.
func (a *Adapter) respond(id json.RawMessage, result any) error {
	return a.write(outResult{JSONRPC: "2.0", ID: id, Result: result})
}

// handleResponse routes a response to its call (reader goroutine).
func (a *Adapter) handleResponse(m *message) {
	key, _ := provider.RequestKey(m.ID) // ours are numbers: a string "1" is not our 1
	a.mu.Lock()
	c, ok := a.calls[key]
	delete(a.calls, key)
	a.mu.Unlock()
	if !ok {
		a.anomaly("response_unknown_id", "id", capText(key, 60))
		return
	}
	if c.onResult != nil {
		c.onResult(m.Result, m.Error)
	}
	if c.resp != nil {
		c.resp <- m
	}
}

// capText cuts s to at most n bytes of valid UTF-8.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// rawOf is b as an item's raw, or nil past event.MaxRawBytes.
func rawOf(b []byte) json.RawMessage {
	if len(b) == 0 || len(b) > 64<<10 || !json.Valid(b) {
		return nil
	}
	return json.RawMessage(validUTF8(append([]byte(nil), b...)))
}

// validUTF8 is b (valid JSON) with each run of invalid UTF-8 replaced by
// U+FFFD. The agent's JSON is kept as raw text (an item's raw and input,
// an approval's detail), which encoding/json passes on byte for byte;
// invalid UTF-8 can only be inside its strings, so b stays valid JSON, and
// a client that decodes UTF-8 strictly can read the event.
func validUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	return bytes.ToValidUTF8(b, []byte("\uFFFD"))
}

// decodeLenient is provider.Decode: a field of the wrong type is left
// zero, the rest is read.
func decodeLenient(data []byte, v any) (bool, error) {
	ok, bad := provider.Decode(data, v)
	if bad != nil {
		return ok, bad
	}
	return ok, nil
}
