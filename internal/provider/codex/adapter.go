// Package codex is the client side of the stdio protocol `codex
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
// order. Lock order: emitMu, then mu; the stdin lock is a leaf (never held while
// taking another lock).
package codex

import (
	"context"
	"log/slog"
	"sync"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// Adapter drives one provider child over its stdio.
type Adapter struct {
	o   Options
	log *slog.Logger
	out *provider.ActivityReader

	done chan struct{} // closed when the reader has emitted everything and stopped

	stdin    lineWriter    // bounded, cancellable writes to o.In (or the runtime's stdin)
	rt       *Runtime      // the shared runtime this thread is on; nil: the adapter owns its child
	stopping chan struct{} // closed by BeginStop
	stopOnce sync.Once

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
	pause     *pauseReq            // a live upgrade's Pause in progress (handoff.go)
	// limitResets: Unix seconds when the account's reached limit lifts,
	// from the latest account/rateLimits/updated (0: none; ratelimit.go).
	limitResets int64
}

// openTurn binds our turn id to the provider's.
type openTurn struct {
	ours        string
	provider    string // empty until turn/start answers or turn/started arrives
	interrupted bool   // our Interrupt asked for it
	// failure is the text of a final `error` (willRetry false): codex ends
	// the turn with its own turn/completed {failed} after it, and only that
	// ends it here (see onError).
	failure string
	// limited: that final error said the account hit a usage or rate
	// limit (ratelimit.go).
	limited bool
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

// lineWriter is where the adapter's lines go: the child's stdin, or a
// thread's cancellable view of a shared runtime's stdin.
type lineWriter interface {
	WriteLine(b []byte) error
	Cancel() bool
}

// NewAdapter returns an adapter and starts its reader goroutine on o.Out.
// The goroutine ends at stdout EOF, on a read error, or when Drain stops it.
func NewAdapter(o Options) *Adapter {
	a := newAdapter(o)
	go a.readLoop()
	return a
}

// newAdapter is an adapter whose reader is not started yet.
func newAdapter(o Options) *Adapter {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.InterruptTimeout <= 0 {
		o.InterruptTimeout = o.RequestTimeout
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
		out:       provider.NewActivityReader(o.Out),
		stdin:     provider.NewStdin(o.In, o.RequestTimeout),
		done:      make(chan struct{}),
		stopping:  make(chan struct{}),
		calls:     map[string]*call{},
		approvals: map[string]*approval{},
		warned:    map[string]bool{},
		items:     newItemState(),
	}
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
