package provider

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
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

func (e *RPCError) Error() string {
	return fmt.Sprintf("provider error %d: %s", e.Code, e.Message)
}

// codeMethodNotFound answers a server request the adapter does not know.
const codeMethodNotFound = -32601

// requestKey is the requestId clients see for a provider request id.
func (a *Adapter) requestKey(raw json.RawMessage) string {
	return a.o.RequestIDPrefix + idKey(raw)
}

// idKey normalizes a request id: a string's contents, a number's text.
func idKey(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
		return n.String()
	}
	return string(raw)
}

// errLineTooLong: a line exceeded MaxLineBytes; its rest was skipped.
var errLineTooLong = errors.New("line too long")

// lineReader returns newline-terminated lines of at most max bytes. A longer
// line is skipped up to its newline without buffering it whole.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, min(64<<10, max+1)), max: max}
}

// next returns the next line without its newline. errLineTooLong reports a
// skipped line (the reader stays usable); other errors end the stream. A
// final line without a newline is returned before io.EOF.
func (lr *lineReader) next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	tooLong := false
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if !tooLong {
			if len(lr.buf)+len(chunk) > lr.max+1 { // +1: the newline
				tooLong = true
				lr.buf = lr.buf[:0]
			} else {
				lr.buf = append(lr.buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && (tooLong || len(lr.buf) == 0):
			if tooLong && errors.Is(err, io.EOF) {
				return nil, errLineTooLong
			}
			return nil, err
		case err != nil:
			return lr.buf, nil // final unterminated line; EOF comes next call
		case tooLong:
			return nil, errLineTooLong
		}
		return lr.buf[:len(lr.buf)-1], nil
	}
}

// write sends one message as a line. Write failures wrap ErrExited.
func (a *Adapter) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("provider: marshal: %w", err)
	}
	b = append(b, '\n')
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	// A provider that stops reading must not block its caller (who may hold
	// the session lock the close ladder needs): a pipe's write is bounded by
	// the request timeout, and CancelWrites ends it at once.
	if d, ok := a.o.In.(writeDeadliner); ok {
		if d.SetWriteDeadline(time.Now().Add(a.o.RequestTimeout)) == nil {
			defer d.SetWriteDeadline(time.Time{})
		}
	}
	// Checked after the deadline is set: a CancelWrites racing this write
	// either is seen here or sets its past deadline after ours.
	if a.writesCancelled.Load() {
		return fmt.Errorf("provider: write stdin: %w", ErrStopping)
	}
	if _, err := a.o.In.Write(b); err != nil {
		switch {
		case a.writesCancelled.Load():
			return fmt.Errorf("provider: write stdin: %w", ErrStopping)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("provider: write stdin: not read for %s: %w", a.o.RequestTimeout, ErrTimeout)
		}
		return fmt.Errorf("provider: write stdin: %w: %w", ErrExited, err)
	}
	return nil
}

// CancelWrites makes the write in progress (one blocked on a provider that
// stopped reading, or on a stdin a descendant of an exited child still
// holds) and every later write return ErrStopping at once. Requests already
// written still wait for their answer: a child that exited may have written
// it before, and the reader delivers it or reaches EOF. Stdin stays open:
// closing it is the close ladder's first step.
func (a *Adapter) CancelWrites() {
	if a.writesCancelled.Swap(true) {
		return
	}
	if d, ok := a.o.In.(writeDeadliner); ok {
		_ = d.SetWriteDeadline(time.Unix(1, 0)) // in the past: a pending write fails now
	}
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

// writeDeadliner is a stdin that can bound a write (an *os.File pipe).
type writeDeadliner interface {
	SetWriteDeadline(t time.Time) error
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
