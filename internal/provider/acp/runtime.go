package acp

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

// Runtime is one ACP agent process serving many sessions (processes =
// "account"): one reader goroutine owns its stdout and routes every line
// to the thread (an Adapter) whose ACP session it names, one request-id
// space, one initialize (+ authenticate). Routing:
//   - a response goes to the thread that sent the request (by its id,
//     which the runtime handed out);
//   - session/update, session/request_permission and any other message
//     with params.sessionId go to the thread on that session. A session
//     no thread is on is a logged anomaly (rate-limited) and is delivered
//     to nobody; a request of it is answered with an error so the agent
//     does not wait. A detached session's late lines are dropped quietly
//     (and its requests refused);
//   - $/cancel_request goes to every thread (only the one holding that
//     permission request acts on it);
//   - a request naming no session is answered once by the runtime (-32601,
//     or refused for a permission: whose would it be?); a notification
//     naming none is process-wide and goes to every thread (a
//     provider.notice, once per kind and thread); a line that is no
//     JSON-RPC message is counted and logged once by the runtime.
//
// Detach stops routing the session here and, when the agent serves
// session/close (sessionCapabilities.close), closes it there (the agent
// cancels its work and frees it); an agent without it keeps the session
// (its history, its memory) loaded until it exits.
//
// Lock order: an adapter's locks are never held while Runtime.mu is taken
// by it (nextID, bind, release, forgetID, unbind run with none held);
// Runtime.mu is never held while calling into an adapter.
type Runtime struct {
	o     provider.RuntimeOptions
	p     Profile
	log   *slog.Logger
	out   *provider.ActivityReader
	stdin *provider.Stdin
	done  chan struct{} // closed when the reader ended and every thread was told

	control *Adapter // the handshake and the session-less requests

	mu       sync.Mutex
	next     int64
	canLoad  bool
	canClose bool                // the agent serves session/close (Detach)
	agent    string              // the agent's agentInfo.name (marks.go)
	owners   map[string]*Adapter // our request id -> the adapter waiting for it
	sessions map[string]*Adapter // ACP sessionId -> its thread
	detached map[string]bool     // sessions that were detached: their late lines are dropped quietly
	all      map[*Adapter]bool   // every thread opened and not detached
	ended    bool
	warned   map[string]int  // anomaly kind -> times seen (the first at warn level)
	pause    *pauseReq       // a live upgrade's Pause in progress (runtime_handoff.go)
	handed   map[string]bool // an adopted runtime's sessions not yet installed (runtime_handoff.go)
	// Lines of sessions no session/new has answered yet (runtime_early.go).
	opening    int // session/new calls in flight
	early      []earlyLine
	earlyBytes int
	stopped    atomic.Bool
}

// NewRuntime is the acp protocol's provider.NewRuntime for a profile
// without settings.
func NewRuntime(o provider.RuntimeOptions) provider.Runtime { return newRuntime(o, Profile{}) }

// NewRuntimeFor is provider.NewRuntime for a profile: its auth_method is
// used once, by the runtime's handshake.
func NewRuntimeFor(p Profile) provider.NewRuntime {
	return func(o provider.RuntimeOptions) provider.Runtime { return newRuntime(o, p) }
}

var _ provider.NewRuntime = NewRuntime

func newRuntime(o provider.RuntimeOptions, p Profile) *Runtime {
	r := buildRuntime(o, p)
	go r.readLoop()
	return r
}

// buildRuntime is a runtime whose reader is not started yet.
func buildRuntime(o provider.RuntimeOptions, p Profile) *Runtime {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = provider.DefaultRequestTimeout
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = provider.DefaultMaxLineBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{
		o: o, p: p, log: o.Logger, out: provider.NewActivityReader(o.Out), stdin: provider.NewStdin(o.In, o.RequestTimeout),
		done: make(chan struct{}), owners: map[string]*Adapter{}, sessions: map[string]*Adapter{}, detached: map[string]bool{},
		all: map[*Adapter]bool{}, warned: map[string]int{},
	}
	r.control = r.open(provider.Options{Logger: o.Logger, RequestTimeout: o.RequestTimeout}, p)
	return r
}

// Handshake is initialize (+ authenticate when the profile names a
// method), once per process.
func (r *Runtime) Handshake(ctx context.Context) error {
	facts, err := r.control.handshake(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.canLoad, r.canClose, r.agent = facts.canLoad, facts.canClose, facts.name
	r.mu.Unlock()
	return nil
}

// Thread opens a thread on the runtime; its Start opens or loads
// o.ThreadID's session without a handshake. o.In and o.Out are ignored.
func (r *Runtime) Thread(o provider.Options) provider.Thread {
	o.MaxLineBytes = r.o.MaxLineBytes
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = r.o.RequestTimeout
	}
	return r.thread(r.open(o, r.p))
}

func (r *Runtime) open(o provider.Options, p Profile) *Adapter {
	o.In, o.Out = nil, nil
	a := newAdapter(o, p)
	a.rt = r
	a.out = r.out
	a.stdin = &threadStdin{s: r.stdin, stop: make(chan struct{})}
	r.mu.Lock()
	ended := r.ended
	a.canLoad = r.canLoad
	if !ended {
		r.all[a] = true
	}
	r.mu.Unlock()
	go a.writeLoop()
	if ended {
		a.finish()
	}
	return a
}

// Done is closed once the process's stdout ended and every thread was told.
func (r *Runtime) Done() <-chan struct{} { return r.done }

// BeginStop makes every write and every waiting request of every thread
// give up (ErrStopping): the process is about to be stopped.
func (r *Runtime) BeginStop() {
	r.stdin.Cancel()
	r.control.BeginStop()
	for _, a := range r.threads() {
		a.BeginStop()
	}
}

// Drain waits for stdout's end or `quiet` of silence, then stops: nothing
// is routed to any thread after it returns.
func (r *Runtime) Drain(ctx context.Context, quiet time.Duration) error {
	if quiet <= 0 {
		quiet = provider.DefaultDrainQuiet
	}
	err := r.out.WaitQuiet(ctx, r.done, quiet)
	r.stopped.Store(true)
	for _, a := range r.threads() {
		a.Silence()
	}
	if c, ok := r.o.Out.(io.Closer); ok {
		_ = c.Close()
	}
	return err
}

func (r *Runtime) threads() []*Adapter {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Adapter, 0, len(r.all))
	for a := range r.all {
		if a != r.control {
			out = append(out, a)
		}
	}
	return out
}

// nextID hands out a request id of the runtime's space to a.
func (r *Runtime) nextID(a *Adapter) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	r.owners[strconv.FormatInt(r.next, 10)] = a
	return r.next
}

// forgetID drops key from the runtime's id space once its call ended.
func (r *Runtime) forgetID(key string) {
	r.mu.Lock()
	delete(r.owners, key)
	r.mu.Unlock()
}

// ErrSessionTaken: the agent answered a session/new with a sessionId
// another thread of this runtime is on, or a load named one.
var ErrSessionTaken = errors.New("ACP session already served to another session on this runtime")

// bind routes sessionID's lines to a.
func (r *Runtime) bind(sessionID string, a *Adapter) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if other := r.sessions[sessionID]; other != nil && other != a {
		r.anomalyLocked("session_taken", "session_id", agentName(sessionID))
		return fmt.Errorf("acp session %s: %w", agentName(sessionID), ErrSessionTaken)
	}
	r.sessions[sessionID] = a
	delete(r.detached, sessionID)
	return nil
}

// release undoes a bind of sessionID to a that did not lead to a session
// (a failed load): its lines are unknown again.
func (r *Runtime) release(sessionID string, a *Adapter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[sessionID] == a {
		delete(r.sessions, sessionID)
	}
}

// unbind stops routing a's session to it; its later lines are dropped
// without an anomaly.
func (r *Runtime) unbind(a *Adapter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, b := range r.sessions {
		if b == a {
			delete(r.sessions, id)
			r.detached[id] = true
		}
	}
	delete(r.all, a)
}

func (r *Runtime) readLoop() {
	defer close(r.done)
	lr := provider.NewLineReader(r.out, r.o.MaxLineBytes)
	for {
		line, err := lr.Next()
		if errors.Is(err, provider.ErrLineTooLong) {
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
	all := make([]*Adapter, 0, len(r.all))
	for a := range r.all {
		all = append(all, a)
	}
	r.mu.Unlock()
	for _, a := range all {
		a.closeOpenItems()
		a.finish()
	}
}

// routed is the part of a line the runtime routes on.
type routed struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (m *routed) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// route hands line to the thread it belongs to (reader goroutine).
func (r *Runtime) route(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m routed
	if line[0] != '{' || json.Unmarshal(line, &m) != nil {
		r.control.handleLine(line) // a banner or log line: counted and logged once
		return
	}
	if m.Method == "" {
		r.routeResponse(&m, line)
		return
	}
	if m.Method == "$/cancel_request" {
		for _, a := range r.threads() { // only the thread holding that request acts
			a.handleLine(line)
		}
		return
	}
	sid, tagged := sessionOf(m.Params)
	if !tagged {
		switch {
		case m.hasID() && m.Method == "session/request_permission":
			r.anomaly("request_without_session", "method", agentName(m.Method))
			r.refuse(&m, codeInvalidParams, "it names no sessionId")
		case m.hasID(), m.Method == "session/update":
			r.control.handleLine(line) // answered (-32601) or logged, once
		default:
			ts := r.threads()
			if len(ts) == 0 {
				r.control.handleLine(line)
			}
			for _, a := range ts { // process-wide: every thread
				a.handleLine(line)
			}
		}
		return
	}
	r.mu.Lock()
	a, quiet := r.sessions[sid], r.detached[sid]
	r.mu.Unlock()
	switch {
	case a != nil:
		a.handleLine(line)
	case quiet:
		r.log.Debug("line of a detached session dropped", "session_id", agentName(sid), "method", agentName(m.Method))
		r.refuse(&m, codeInvalidParams, "the session was detached")
	case r.holdEarly(sid, &m, line):
		// for a session/new still in flight (runtime_early.go)
	default:
		r.anomaly("unknown_session", "session_id", agentName(sid), "method", agentName(m.Method))
		r.refuse(&m, codeInvalidParams, "no session of sessiond is on it")
	}
}

// sessionOf reads params.sessionId; tagged is false when it is absent or
// no non-empty string (then nobody's).
func sessionOf(params json.RawMessage) (string, bool) {
	var p struct {
		SessionID json.RawMessage `json:"sessionId"`
	}
	if len(params) == 0 || params[0] != '{' || json.Unmarshal(params, &p) != nil || len(p.SessionID) == 0 {
		return "", false
	}
	var sid string
	if json.Unmarshal(p.SessionID, &sid) != nil || sid == "" {
		return "", false
	}
	return sid, true
}

func (r *Runtime) routeResponse(m *routed, line []byte) {
	key, _ := provider.RequestKey(m.ID) // ours are numbers: a string "1" is not our 1
	r.mu.Lock()
	a := r.owners[key]
	delete(r.owners, key)
	r.mu.Unlock()
	if a == nil {
		r.anomaly("response_unknown_id", "id", capText(key, 60))
		return
	}
	a.handleLine(line)
}

// refuse answers a request of the agent nobody is given with an error
// (through the control adapter's queue: the reader never waits on the
// agent's stdin), so the agent does not wait on it; a notification is
// just dropped.
func (r *Runtime) refuse(m *routed, code int, why string) {
	if !m.hasID() {
		return
	}
	if len(m.ID) > maxAgentIDBytes {
		r.anomaly("request_id_too_long", "method", agentName(m.Method), "id_bytes", len(m.ID))
		return
	}
	r.control.respondErrorAsync(m.ID, code, "sessiond cannot route "+agentName(m.Method)+": "+why)
}

// anomaly logs a routing oddity: the first of each kind at warn level,
// later ones at debug (a misbehaving agent cannot flood the log).
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

// Anomalies is how many routing anomalies of kind were seen (tests, stats).
func (r *Runtime) Anomalies(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.warned[kind]
}
