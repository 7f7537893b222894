package echo

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sync"
)

// inMsg is any line the client sends: a request (id+method), a notification
// (method only) or a response to one of our requests (id+result|error).
type inMsg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

func (m *inMsg) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// JSON-RPC error codes the echo provider answers with.
const (
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

// writer serializes every message to stdout: turns run concurrently with
// the read loop (interrupts, approval answers). Messages are buffered and
// flushed per message, except floods, which flush at the end of the turn.
type writer struct {
	mu    sync.Mutex
	out   io.Writer
	bw    *bufio.Writer
	err   error
	muted map[string]bool // unsubscribed threads: their notifications and requests are not sent
}

func newWriter(w io.Writer) *writer {
	return &writer{out: w, bw: bufio.NewWriterSize(w, 64<<10), muted: map[string]bool{}}
}

// mute stops (on) or restarts (off) sending threadID's messages; it
// reports whether the state changed.
func (w *writer) mute(threadID string, on bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.muted[threadID] == on {
		return false
	}
	if on {
		w.muted[threadID] = true
	} else {
		delete(w.muted, threadID)
	}
	return true
}

// mutedLocked reports whether v is a message of a muted thread. Needs mu.
func (w *writer) mutedLocked(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(w.muted) == 0 {
		return false
	}
	p, ok := m["params"].(map[string]any)
	if !ok {
		return false
	}
	id, _ := p["threadId"].(string)
	return w.muted[id]
}

// closeOut flushes and closes the output (when it can be closed): nothing
// more is written.
func (w *writer) closeOut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.bw.Flush()
	}
	if c, ok := w.out.(io.Closer); ok {
		_ = c.Close()
	}
	if w.err == nil {
		w.err = io.ErrClosedPipe
	}
}

// send writes one message as a line; flush pushes it out at once.
func (w *writer) send(v any, flush bool) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("echo: marshal: " + err.Error())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.mutedLocked(v) {
		return
	}
	b = append(b, '\n')
	if _, w.err = w.bw.Write(b); w.err == nil && flush {
		w.err = w.bw.Flush()
	}
}

func (w *writer) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.bw.Flush()
	}
}

func (w *writer) result(id json.RawMessage, result any) {
	w.send(map[string]any{"id": id, "result": result}, true)
}

func (w *writer) fail(id json.RawMessage, e rpcError) {
	w.send(map[string]any{"id": id, "error": e}, true)
}

func (w *writer) notify(method string, params any) {
	w.send(map[string]any{"method": method, "params": params}, true)
}

// sendSplit writes v's line in two parts: the first half (flushed with
// everything before it), then, once fifo was opened and read to its end
// (a test's signal), the rest. A reader of our stdout sees a line cut
// for as long as the test wants (/split).
func (w *writer) sendSplit(v any, fifo string, log *slog.Logger) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("echo: marshal: " + err.Error())
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	half := len(b) / 2
	if _, w.err = w.bw.Write(b[:half]); w.err == nil {
		w.err = w.bw.Flush()
	}
	log.Info("line cut (/split): waiting for the fifo", "fifo", fifo, "written", half)
	if f, err := os.Open(fifo); err == nil {
		io.Copy(io.Discard, f)
		f.Close()
	} else {
		log.Warn("/split: open fifo", "err", err)
	}
	if w.err == nil {
		_, w.err = w.bw.Write(b[half:])
	}
	if w.err == nil {
		w.err = w.bw.Flush()
	}
}
