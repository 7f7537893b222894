// Package provider is the client side of the stdio protocol `codex
// app-server` speaks (newline-delimited JSON-RPC), used by the host to drive
// one provider child per live session: handshake, start or resume the
// session's thread, start and interrupt turns, answer approvals, and turn
// the provider's notifications and requests into journal event drafts.
//
// The wire is lenient on purpose: the "jsonrpc" field may be absent or
// present, unknown fields and notifications are ignored, request ids may be
// numbers or strings, and unparseable or oversized lines are skipped (logged
// once per kind) without ending the session.
//
// Concurrency: one reader goroutine owns Out and calls Emit in provider
// order. Lock order: emitMu, then mu; writeMu is a leaf (never held while
// taking another lock).
package provider

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// Errors of the adapter.
var (
	// ErrExited means the provider's stdout ended or its stdin is gone
	// (EPIPE): the process exited or is exiting.
	ErrExited = errors.New("provider exited")
	// ErrRequestNotFound means Respond named no pending approval request.
	ErrRequestNotFound = errors.New("approval request not found")
	// ErrTurnRunning means StartTurn was called while a turn is open.
	ErrTurnRunning = errors.New("a turn is already running")
	// ErrNotStarted means a turn method was called before Start succeeded.
	ErrNotStarted = errors.New("provider thread not started")
	// ErrTimeout means the provider did not answer a request within
	// Options.RequestTimeout.
	ErrTimeout = errors.New("provider request timed out")
	// ErrStopping means the host is stopping the provider (CancelWrites,
	// BeginStop): the write or request was abandoned.
	ErrStopping = errors.New("provider is being stopped")
)

// Defaults of Options.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultMaxLineBytes   = 8 << 20
)

// Options configures an Adapter. In and Out are the child's stdin and
// stdout; Emit receives every event the provider's messages map to.
type Options struct {
	In       io.WriteCloser
	Out      io.Reader
	Cwd      string
	ThreadID string
	// Emit is called in provider order from the reader goroutine (and from
	// Start/Respond for the events they produce), never concurrently.
	Emit           func(event.Draft)
	Logger         *slog.Logger
	RequestTimeout time.Duration // default 30s
	MaxLineBytes   int           // default 8 MiB
	// RequestIDPrefix starts every requestId the adapter hands out for a
	// provider's request: a provider numbers its requests afresh in each
	// process, so the host makes them unique per incarnation (an answer
	// meant for a request of an earlier child must never reach a newer
	// request that reuses its number).
	RequestIDPrefix string
}

// StartResult is what Start learned: the thread in use, whether it was
// resumed, and, when the old thread was gone, the replacement.
type StartResult struct {
	ThreadID string
	Resumed  bool
	Replaced *event.ThreadReplacedData
}

// Adapter drives one provider child over its stdio.
type Adapter struct {
	o   Options
	log *slog.Logger
	out *activityReader

	done chan struct{} // closed when the reader has emitted everything and stopped

	writeMu         sync.Mutex    // serializes writes to o.In
	writesCancelled atomic.Bool   // CancelWrites (or BeginStop) was called
	stopping        chan struct{} // closed by BeginStop
	stopOnce        sync.Once

	// emitMu serializes Emit calls and guards stopped: once Drain has
	// stopped reading, nothing more is emitted.
	emitMu  sync.Mutex
	stopped bool

	mu        sync.Mutex
	nextID    int64
	calls     map[string]*call // our request id -> waiting call
	threadID  string
	turn      *openTurn            // the open turn, nil when none
	approvals map[string]*approval // provider request id (as string) -> pending approval
	warned    map[string]bool      // anomaly kinds already logged at warn level
	items     itemState            // per-turn item bookkeeping (items.go)
	approvalN int64                // approvals seen, for their order
	reading   string               // the method being handled (for anomaly logs)
	lastEnded string               // provider id of the turn that ended last
}

// openTurn binds our turn id to the provider's.
type openTurn struct {
	ours        string
	provider    string // empty until turn/start answers or turn/started arrives
	interrupted bool   // our Interrupt asked for it
}

// approval is a server request waiting for Respond.
type approval struct {
	rawID   []byte // the id exactly as the provider sent it
	turnID  string // our turn id at the time of the request
	method  string // the provider's request method
	kind    string // approval.requested kind
	options []string
	params  []byte // the request's params (a permissions grant echoes them)
	order   int64  // arrival order, for cancelling in request order
}

// NewAdapter returns an adapter and starts its reader goroutine on o.Out.
// The goroutine ends at stdout EOF, on a read error, or when Drain stops it.
func NewAdapter(o Options) *Adapter {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.Emit == nil {
		o.Emit = func(event.Draft) {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Adapter{
		o:         o,
		log:       o.Logger,
		out:       newActivityReader(o.Out),
		done:      make(chan struct{}),
		stopping:  make(chan struct{}),
		calls:     map[string]*call{},
		approvals: map[string]*approval{},
		warned:    map[string]bool{},
		items:     newItemState(),
	}
	go a.readLoop()
	return a
}

// Done is closed once the reader finished (EOF, read error or Drain) and
// everything read before has been emitted.
func (a *Adapter) Done() <-chan struct{} { return a.done }

// Busy reports an open turn or an unanswered approval.
func (a *Adapter) Busy() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.turn != nil || len(a.approvals) > 0
}

// ThreadID is the thread in use (empty before Start succeeded).
func (a *Adapter) ThreadID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.threadID
}

// emit hands a draft to Emit unless Drain already stopped the adapter.
func (a *Adapter) emit(d event.Draft) {
	a.emitMu.Lock()
	defer a.emitMu.Unlock()
	if !a.stopped {
		a.o.Emit(d)
	}
}

// anomaly logs a protocol oddity: the first of each kind at warn level,
// later ones at debug, so a misbehaving provider cannot flood the log.
func (a *Adapter) anomaly(kind string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.anomalyLocked(kind, args...)
}

func (a *Adapter) anomalyLocked(kind string, args ...any) {
	first := !a.warned[kind]
	a.warned[kind] = true
	lvl := slog.LevelDebug
	if first {
		lvl = slog.LevelWarn
	}
	a.log.Log(context.Background(), lvl, "provider protocol anomaly", append([]any{"kind", kind}, args...)...)
}

// activityReader records when bytes last arrived and whether the reader is
// blocked waiting for more, for Drain's quiet rule.
type activityReader struct {
	r       io.Reader
	last    atomic.Int64 // unix nanos of the last read that returned bytes
	waiting atomic.Bool  // inside r.Read
}

func newActivityReader(r io.Reader) *activityReader {
	ar := &activityReader{r: r}
	ar.last.Store(time.Now().UnixNano())
	return ar
}

func (ar *activityReader) Read(p []byte) (int, error) {
	ar.waiting.Store(true)
	n, err := ar.r.Read(p)
	ar.waiting.Store(false)
	if n > 0 {
		ar.last.Store(time.Now().UnixNano())
	}
	return n, err
}
