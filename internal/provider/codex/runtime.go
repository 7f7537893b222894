package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/provider"
)

// Runtime is one `codex app-server` process serving many threads: one
// reader goroutine owns its stdout and routes every line to the thread it
// belongs to (by params.threadId; a response by its id, which the runtime
// handed out), one request-id space, one handshake. A notification
// without a thread id is process-wide and goes to every thread, which
// treats it as it always has (a provider.notice, or ignored). A line for
// a thread the runtime does not serve is a logged anomaly (rate-limited)
// and is delivered to nobody; so is a thread's event tagged with another
// thread's turn (the thread's own adapter refuses it).
//
// Lock order: a thread adapter's locks, then Runtime.mu (nextID runs with
// the adapter's mu held); Runtime.mu is never held while calling into an
// adapter.
type Runtime struct {
	o     provider.RuntimeOptions
	log   *slog.Logger
	out   *provider.ActivityReader
	stdin *provider.Stdin
	done  chan struct{} // closed when the reader ended and every thread was told

	control *Adapter // the handshake and thread-less requests

	mu       sync.Mutex
	next     int64
	owners   map[int64]*Adapter  // our request id -> the adapter waiting for it
	threads  map[string]*Adapter // provider thread id -> its adapter
	detached map[string]bool     // threads that were detached: their late lines are dropped quietly
	all      map[*Adapter]bool   // every adapter opened on the runtime and not detached
	ended    bool
	warned   map[string]int  // anomaly kind -> times seen (the first at warn level)
	pause    *pauseReq       // a live upgrade's Pause in progress (runtime_handoff.go)
	handed   map[string]bool // an adopted runtime's threads not yet installed (runtime_handoff.go)
	stopped  atomic.Bool
}

// NewRuntime returns a runtime over a spawned child and starts its reader.
func NewRuntime(o provider.RuntimeOptions) provider.Runtime {
	return newRuntime(o)
}

func newRuntime(o provider.RuntimeOptions) *Runtime {
	r := buildRuntime(o)
	go r.readLoop()
	return r
}

// buildRuntime is a runtime whose reader is not started yet.
func buildRuntime(o provider.RuntimeOptions) *Runtime {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{
		o:        o,
		log:      o.Logger,
		out:      provider.NewActivityReader(o.Out),
		stdin:    provider.NewStdin(o.In, o.RequestTimeout),
		done:     make(chan struct{}),
		owners:   map[int64]*Adapter{},
		threads:  map[string]*Adapter{},
		detached: map[string]bool{},
		all:      map[*Adapter]bool{},
		warned:   map[string]int{},
	}
	r.control = r.open(provider.Options{Logger: o.Logger, RequestTimeout: o.RequestTimeout})
	return r
}

// Handshake is initialize + initialized, once per process.
func (r *Runtime) Handshake(ctx context.Context) error { return r.control.handshake(ctx) }

// Thread opens a thread adapter on the runtime; its Start starts or
// resumes o.ThreadID without a handshake. o.In and o.Out are ignored.
func (r *Runtime) Thread(o provider.Options) provider.Thread {
	o.MaxLineBytes = r.o.MaxLineBytes
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = r.o.RequestTimeout
	}
	return r.open(o)
}

func (r *Runtime) open(o provider.Options) *Adapter {
	a := newAdapter(o)
	a.rt = r
	a.out = r.out
	a.stdin = &threadStdin{s: r.stdin, stop: make(chan struct{})}
	r.mu.Lock()
	ended := r.ended
	if !ended {
		r.all[a] = true
	}
	r.mu.Unlock()
	if ended {
		close(a.done)
	}
	return a
}

// Done is closed once the process's stdout ended and every thread was told.
func (r *Runtime) Done() <-chan struct{} { return r.done }

// BeginStop makes every write and every waiting request of every thread
// give up (ErrStopping): the process is about to be stopped.
func (r *Runtime) BeginStop() {
	r.stdin.Cancel()
	for _, a := range r.adapters() {
		a.BeginStop()
	}
}

// Drain waits for stdout's end or `quiet` of silence, then stops: nothing
// is routed to any thread after it returns.
func (r *Runtime) Drain(ctx context.Context, quiet time.Duration) error {
	if quiet <= 0 {
		quiet = DefaultDrainQuiet
	}
	err := r.out.WaitQuiet(ctx, r.done, quiet)
	r.stopped.Store(true)
	for _, a := range r.adapters() {
		a.stop()
	}
	if c, ok := r.o.Out.(io.Closer); ok {
		_ = c.Close()
	}
	return err
}

func (r *Runtime) adapters() []*Adapter {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Adapter, 0, len(r.all))
	for a := range r.all {
		out = append(out, a)
	}
	return out
}

// nextID hands out a request id of the runtime's space to a. Needs a.mu.
func (r *Runtime) nextID(a *Adapter) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	r.owners[r.next] = a
	return r.next
}

// forgetID drops id from the runtime's id space once its call ended (a
// call its caller gave up on would otherwise keep its entry, and its
// adapter, for the process's life; a late answer is then an anomaly).
func (r *Runtime) forgetID(id int64) {
	r.mu.Lock()
	delete(r.owners, id)
	r.mu.Unlock()
}

// ErrThreadTaken: the provider answered a thread/start or thread/resume
// with a thread another session on this runtime already has.
var ErrThreadTaken = errors.New("thread already served to another session on this runtime")

// bind routes threadID's lines to a (reader goroutine, from the thread
// call's result).
func (r *Runtime) bind(threadID string, a *Adapter) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if other := r.threads[threadID]; other != nil && other != a {
		r.anomalyLocked("thread_taken", "thread_id", threadID)
		return fmt.Errorf("thread %s: %w", threadID, ErrThreadTaken)
	}
	r.threads[threadID] = a
	delete(r.detached, threadID)
	return nil
}

// release undoes a bind of threadID to a that did not lead to a thread
// (a refused resume): its lines are unknown again.
func (r *Runtime) release(threadID string, a *Adapter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.threads[threadID] == a {
		delete(r.threads, threadID)
	}
}

// unbind stops routing a's thread to it; later lines of the thread are
// dropped without an anomaly.
func (r *Runtime) unbind(a *Adapter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, b := range r.threads {
		if b == a {
			delete(r.threads, id)
			r.detached[id] = true
		}
	}
	delete(r.all, a)
}

func (r *Runtime) readLoop() {
	defer close(r.done)
	lr := newLineReader(r.out, r.o.MaxLineBytes)
	for {
		line, err := lr.Next()
		if errors.Is(err, errLineTooLong) {
			r.anomaly("line_too_long", "max_bytes", r.o.MaxLineBytes)
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && r.parkIfPaused(lr.Unparsed()) {
			continue // resumed: the deadline is cleared, the cut line goes on
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
				r.log.Warn("read provider stdout", "err", err)
			}
			break
		}
		if !r.stopped.Load() {
			r.route(line)
		}
	}
	r.mu.Lock()
	r.ended = true
	var all []*Adapter
	for a := range r.all {
		all = append(all, a)
	}
	r.mu.Unlock()
	for _, a := range all {
		a.closeOpenItems()
		close(a.done)
	}
}

// routed is the part of a line the runtime routes on.
type routed struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (m *routed) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// route hands line to the adapter it belongs to (reader goroutine).
func (r *Runtime) route(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m routed
	if json.Unmarshal(line, &m) != nil {
		r.anomaly("unparseable_line", "line", truncate(line, 120))
		return
	}
	if m.Method == "" && m.hasID() {
		r.routeResponse(&m, line)
		return
	}
	threadID, tagged, ok := threadOf(m.Params)
	if !ok {
		r.anomaly("bad_thread_id", "method", truncate([]byte(m.Method), 100))
		r.refuseUnrouted(&m, "its threadId is not a string")
		return
	}
	if !tagged {
		if m.hasID() {
			r.routeThreadless(&m, line)
			return
		}
		for _, a := range r.adapters() { // process-wide: every thread
			a.handleLine(line)
		}
		return
	}
	r.mu.Lock()
	a, quiet := r.threads[threadID], r.detached[threadID]
	r.mu.Unlock()
	switch {
	case a != nil:
		a.handleLine(line)
	case quiet || isIgnored(m.Method):
		// A detached thread's late line, or a status line codex sends for
		// a thread it loads before answering the call that names it.
		r.log.Debug("line of a thread no session is on dropped", "thread_id", truncate([]byte(threadID), 80), "method", truncate([]byte(m.Method), 100))
		r.refuseUnrouted(&m, "the thread was unsubscribed")
	default:
		r.anomaly("unknown_thread", "thread_id", truncate([]byte(threadID), 80), "method", truncate([]byte(m.Method), 100))
		r.refuseUnrouted(&m, "no session is on this thread")
	}
}

// isIgnored: a notification the adapters would not journal anyway.
func isIgnored(method string) bool {
	_, ok := notifyIgnored[method]
	return ok
}

// threadOf reads params.threadId: tagged is false when absent, ok false
// when present but not a string.
func threadOf(params json.RawMessage) (threadID string, tagged, ok bool) {
	if len(params) == 0 || params[0] != '{' {
		return "", false, true
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return "", false, true
	}
	raw, has := p["threadId"]
	if !has || string(raw) == "null" {
		return "", false, true
	}
	if json.Unmarshal(raw, &threadID) != nil || threadID == "" {
		return "", true, false
	}
	return threadID, true, true
}

func (r *Runtime) routeResponse(m *routed, line []byte) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	r.mu.Lock()
	a := r.owners[id]
	delete(r.owners, id)
	r.mu.Unlock()
	if err != nil || a == nil {
		r.anomaly("response_unknown_id", "id", truncate(m.ID, 40))
		return
	}
	a.handleLine(line)
}

// routeThreadless: a request naming no thread. One a person would answer
// cannot be given to a session (whose?): it is refused. The rest get the
// adapter's automatic answer (refusals) from the control adapter.
func (r *Runtime) routeThreadless(m *routed, line []byte) {
	if _, relayed := requestRelayed[m.Method]; relayed {
		r.anomaly("request_without_thread", "method", truncate([]byte(m.Method), 100))
		r.refuseUnrouted(m, "it names no thread")
		return
	}
	r.control.handleLine(line)
}

// refuseUnrouted answers a server request nobody is given with an error,
// so the provider does not wait on it (a notification is just dropped).
func (r *Runtime) refuseUnrouted(m *routed, why string) {
	if !m.hasID() || m.Method == "" {
		return
	}
	b, err := json.Marshal(outError{ID: m.ID, Error: RPCError{Code: codeInvalidRequest,
		Message: "sessiond cannot route request " + truncate([]byte(m.Method), 100) + ": " + why}})
	if err == nil {
		err = r.stdin.WriteLine(append(b, '\n'))
	}
	if err != nil {
		r.log.Warn("answer unroutable provider request", "method", truncate([]byte(m.Method), 100), "err", err)
	}
}

// anomaly logs a routing oddity: the first of each kind at warn level,
// later ones at debug (a misbehaving provider cannot flood the log).
func (r *Runtime) anomaly(kind string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.anomalyLocked(kind, args...)
}

func (r *Runtime) anomalyLocked(kind string, args ...any) {
	r.warned[kind]++
	lvl := slog.LevelDebug
	if r.warned[kind] == 1 {
		lvl = slog.LevelWarn
	}
	r.log.Log(context.Background(), lvl, "provider protocol anomaly", append([]any{"kind", kind, "seen", r.warned[kind]}, args...)...)
}

// Anomalies is how many routing anomalies of kind were seen (for tests
// and stats).
func (r *Runtime) Anomalies(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.warned[kind]
}

// threadStdin is one thread's view of the runtime's stdin: cancelling it
// (the session is being torn down) fails that thread's writes only.
// A write of the thread waiting behind other threads' writes gives up at
// its Cancel.
type threadStdin struct {
	s         *provider.Stdin
	stop      chan struct{} // closed by Cancel
	cancelled atomic.Bool
}

func (t *threadStdin) WriteLine(b []byte) error {
	if t.cancelled.Load() {
		return fmt.Errorf("provider: write stdin: %w", ErrStopping)
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

// CommandEnv: codex 0.169 sets CODEX_THREAD_ID (the thread id) on every
// command process it runs (provider.CommandMarker).
func (a *Adapter) CommandEnv() string { return "CODEX_THREAD_ID" }

var _ provider.CommandMarker = (*Adapter)(nil)

// Detach stops the thread's events: thread/unsubscribe (codex keeps the
// thread loaded, and its writer lock, until the process exits), then
// nothing more of the thread reaches this adapter. A runtime that is gone
// has nothing to unsubscribe: not an error.
func (a *Adapter) Detach(ctx context.Context) error {
	if a.rt == nil {
		return nil
	}
	a.mu.Lock()
	thread := a.threadID
	a.mu.Unlock()
	var err error
	if thread != "" {
		_, err = a.request(ctx, "thread/unsubscribe", map[string]any{"threadId": thread}, nil)
		if errors.Is(err, ErrExited) || errors.Is(err, ErrStopping) {
			err = nil
		}
	}
	a.stop()
	a.rt.unbind(a)
	if err != nil {
		return fmt.Errorf("detach thread %s: %w", thread, err)
	}
	return nil
}

// Silence stops emitting now (the reader goes on routing the thread's
// lines to nobody): what the session journals from here on is the host's.
func (a *Adapter) Silence() { a.stop() }
