// Package acp is the client side of the Agent Client Protocol (version 1):
// newline-delimited JSON-RPC 2.0 over an agent's stdio (codex-acp,
// `copilot --acp`, `qwen --acp`, `opencode acp`, claude-agent-acp,
// `gemini --acp`, …). The daemon initializes without fs or terminal
// capabilities (agents use their own tools), authenticates only when the
// profile names a method, opens the session with session/new or
// session/load (the thread id is ACP's sessionId), sends one
// session/prompt per turn (its answer ends the turn), cancels with
// session/cancel and relays session/request_permission as approvals.
// Every session/update kind is mapped, on the ignore list, or journaled
// as provider.notice (tables.go); a client method the daemon does not
// serve is answered -32601.
//
// With processes = "account" one agent process serves many sessions: a
// Runtime (runtime.go) owns its stdio, does the handshake once and routes
// each line by its sessionId to the session's thread, an Adapter without
// a reader of its own.
//
// Concurrency: one reader goroutine handles stdout in order. Lock order:
// answerMu (Respond, Interrupt: never the reader), then emitMu, then mu;
// the stdin lock is a leaf.
package acp

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// ProtocolVersion is the ACP version the daemon speaks.
const ProtocolVersion = 1

// ClientVersion is sent as clientInfo.version in initialize.
var ClientVersion = "dev"

// Profile is what an ACP profile adds to provider.Options.
type Profile struct {
	// AuthMethod, when set, is the methodId Start authenticates with
	// after initialize (config key auth_method).
	AuthMethod string
}

// Adapter drives one ACP agent over its stdio.
type Adapter struct {
	o     provider.Options
	p     Profile
	log   *slog.Logger
	out   *provider.ActivityReader
	stdin lineWriter // the child's stdin, or a thread's view of a shared runtime's

	// rt is the shared runtime the adapter is a thread of (runtime.go),
	// nil for an agent process of its own.
	rt *Runtime

	done     chan struct{} // closed when the reader stopped and emitted everything
	doneOnce sync.Once
	stopping chan struct{} // closed by BeginStop
	stopOnce sync.Once

	// answerMu orders our answers to permission requests against
	// session/cancel (Respond, Interrupt); taken before emitMu.
	answerMu sync.Mutex

	emitMu  sync.Mutex
	stopped bool

	mu       sync.Mutex
	nextID   int64
	calls    map[string]*call // our requests waiting for their answer
	threadID string
	loading  string // the sessionId a session/load is replaying (its updates are not journaled)
	started  bool
	canLoad  bool
	turn     *openTurn
	// afterCancel: the last turn was one we cancelled and no turn started
	// since; a permission request now is answered cancelled at once.
	afterCancel bool
	approvals   map[string]*approval // requestId -> pending session/request_permission
	approvalN   int64
	// approvalBytes is what approvals hold (approval.size + key), at most
	// maxApprovalBytes.
	approvalBytes int
	warned        map[string]bool     // notice keys journaled (at most maxNoticeKeys; notices.go)
	noticesOver   int64               // new notice keys past maxNoticeKeys
	logs          map[string]*logRate // anomaly kinds logged (at most maxLogKinds + 1)
	now           func() time.Time
	garbage       int64 // lines that were no JSON-RPC message
	stuck         *time.Timer
	pause         *pauseReq // a live upgrade's Pause in progress (handoff.go)

	// answers is the outbound queue of our answers to the agent's
	// requests, written by writeLoop: the reader never waits on the
	// agent's stdin (a nil line is a barrier: flushed closes it). hung
	// is set once the queue was full (the agent does not read its stdin).
	answers     chan queued
	queuedBytes atomic.Int64 // the bytes of the lines in answers
	hung        atomic.Bool
}

// lineWriter is where the adapter's lines go: the child's stdin, or a
// thread's cancellable view of a shared runtime's stdin.
type lineWriter interface {
	WriteLine(b []byte) error
	Cancel() bool
}

// maxQueuedAnswers bounds the answers waiting for the agent to read its
// stdin; one more and the agent is hung (Options.Stuck). Room for a
// cancel answering every open permission at once, and as many more.
const maxQueuedAnswers = 2 * maxOpenApprovals

// maxQueuedAnswerBytes bounds the bytes of those answers (an answer
// echoes the agent's request id): one more and the agent is hung, as when
// the count is reached; a single answer over it is queued only alone.
const maxQueuedAnswerBytes = 1 << 20

// openTurn is the turn whose session/prompt is unanswered.
type openTurn struct {
	ours        string
	promptID    string // our id of its session/prompt
	interrupted bool   // we sent session/cancel
	denied      bool   // the user denied a permission of this turn
	msgN        int
	msg         *textItem // the agent's text since the last item
	thought     *thought  // the open reasoning item
	tools       map[string]*tool
	toolOrder   []string
	toolBytes   int // what the open tools hold (tool.size)
}

// New is the acp protocol's provider.New for a profile without settings.
func New(o provider.Options) provider.Adapter { return NewAdapter(o, Profile{}) }

// NewFor is provider.New for a profile.
func NewFor(p Profile) provider.New {
	return func(o provider.Options) provider.Adapter { return NewAdapter(o, p) }
}

// NewAdapter returns an adapter and starts its reader on o.Out.
func NewAdapter(o provider.Options, p Profile) *Adapter {
	a := newAdapter(o, p)
	a.run()
	return a
}

// newAdapter is an adapter whose reader is not started yet.
func newAdapter(o provider.Options, p Profile) *Adapter {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = provider.DefaultRequestTimeout
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = provider.DefaultMaxLineBytes
	}
	if o.InterruptTimeout <= 0 {
		o.InterruptTimeout = o.RequestTimeout
	}
	if o.Emit == nil {
		o.Emit = func(event.Draft) {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Adapter{
		o: o, p: p, log: o.Logger, out: provider.NewActivityReader(o.Out), stdin: provider.NewStdin(o.In, o.RequestTimeout),
		done: make(chan struct{}), stopping: make(chan struct{}),
		calls: map[string]*call{}, approvals: map[string]*approval{}, warned: map[string]bool{},
		logs: map[string]*logRate{}, now: time.Now,
		answers: make(chan queued, maxQueuedAnswers),
	}
	return a
}

// run starts the reader and the answers' writer.
func (a *Adapter) run() {
	go a.readLoop()
	go a.writeLoop()
}

// Done is closed once the reader finished and everything read was emitted
// (a thread of a shared runtime: the runtime's reader, or its Detach).
func (a *Adapter) Done() <-chan struct{} { return a.done }

// finish closes done, once.
func (a *Adapter) finish() { a.doneOnce.Do(func() { close(a.done) }) }

// Busy reports an open turn or an unanswered approval.
func (a *Adapter) Busy() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.turn != nil || len(a.approvals) > 0
}

// ThreadID is the agent's sessionId (empty before Start succeeded).
func (a *Adapter) ThreadID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.threadID
}

// Drain waits for stdout's end or `quiet` of silence, then stops emitting.
func (a *Adapter) Drain(ctx context.Context, quiet time.Duration) error {
	if a.rt != nil {
		a.Silence() // a thread of a shared runtime: the runtime drains the process
		return nil
	}
	if quiet <= 0 {
		quiet = provider.DefaultDrainQuiet
	}
	err := a.out.WaitQuiet(ctx, a.done, quiet)
	a.mu.Lock()
	if a.stuck != nil {
		a.stuck.Stop()
	}
	a.mu.Unlock()
	a.emitMu.Lock()
	a.stopped = true
	a.emitMu.Unlock()
	if c, ok := a.o.Out.(io.Closer); ok {
		_ = c.Close()
	}
	return err
}

// CancelWrites makes every pending and later write fail ErrStopping.
func (a *Adapter) CancelWrites() { a.stdin.Cancel() }

// BeginStop is CancelWrites, and every waiting request returns ErrStopping.
func (a *Adapter) BeginStop() {
	a.CancelWrites()
	a.stopOnce.Do(func() { close(a.stopping) })
}

func (a *Adapter) emit(d event.Draft) {
	a.emitMu.Lock()
	defer a.emitMu.Unlock()
	if !a.stopped {
		a.o.Emit(d)
	}
}

// turnID is our id of the open turn ("" when none).
func (a *Adapter) turnID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.turn == nil {
		return ""
	}
	return a.turn.ours
}
