// Package provider is what the host knows of a provider child: the
// Adapter interface (start or resume its thread, start and interrupt
// turns, answer approvals, drain, stop writing) that every protocol
// implements, the options it is built from, and the errors and decisions
// they share. Each protocol lives in its own subpackage
// (internal/provider/codex: `codex app-server`; internal/provider/claude:
// Claude Code's stream-json; internal/provider/acp: the Agent Client
// Protocol); the host is handed a New function per
// configured provider and never learns which protocol it holds.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// Adapter drives one provider child over its stdio. Events go to
// Options.Emit in provider order.
type Adapter interface {
	// Start starts a thread, or resumes Options.ThreadID (a thread the
	// provider no longer has is replaced and provider.thread_replaced
	// emitted; any other resume failure fails Start and keeps the old id).
	Start(ctx context.Context) (StartResult, error)
	// StartTurn sends one user message as turn turnID (ours).
	StartTurn(ctx context.Context, turnID, text string) error
	// Interrupt asks the provider to end the open turn; false when none.
	Interrupt(ctx context.Context) (bool, error)
	// Respond answers a pending approval and emits approval.resolved.
	Respond(ctx context.Context, requestID string, ans Answer) error
	// Busy reports an open turn or an unanswered approval.
	Busy() bool
	// Drain reads what the provider still writes until EOF or `quiet`
	// of silence, then stops emitting.
	Drain(ctx context.Context, quiet time.Duration) error
	// CancelWrites makes every pending and later write fail ErrStopping.
	CancelWrites()
	// BeginStop is CancelWrites, and every waiting request returns
	// ErrStopping: the child is about to be stopped.
	BeginStop()
	// Done is closed once the reader finished and emitted everything.
	Done() <-chan struct{}
	// ThreadID is the thread in use (empty before Start succeeded).
	ThreadID() string
}

// New builds an Adapter over a spawned child (one per protocol).
type New func(Options) Adapter

// Runtime is one provider process serving many threads (a protocol that
// can share: codex-app-server, acp): it owns the child's stdio, does the
// handshake once, keeps one request-id space, routes each line to the
// thread it belongs to and hands process-wide notifications to every
// thread. A protocol that cannot share (claude-stream-json) has no
// NewRuntime: its sessions always get a process of their own through New
// (a runtime of one).
type Runtime interface {
	// Handshake initializes the process (once, before any Thread starts).
	Handshake(ctx context.Context) error
	// Thread opens a thread on the runtime (Options.In/Out are ignored);
	// its Start starts or resumes Options.ThreadID.
	Thread(o Options) Thread
	// Drain reads until EOF or `quiet` of silence, then routes nothing more.
	Drain(ctx context.Context, quiet time.Duration) error
	// BeginStop makes every thread's writes and waiting requests give up.
	BeginStop()
	// Done is closed once the reader ended and every thread was told.
	Done() <-chan struct{}
}

// Thread is one session's thread on a shared runtime: an Adapter whose
// Drain only stops its events, plus Detach.
type Thread interface {
	Adapter
	// Detach stops the thread's events in the provider (codex:
	// thread/unsubscribe) and on this side; the provider may keep the
	// thread loaded until its process exits.
	Detach(ctx context.Context) error
	// Silence stops emitting now (a teardown journals the rest itself).
	Silence()
}

// CommandMarker is a Thread whose provider marks every command process
// it runs for the thread with an environment entry: CommandEnv's key set
// to the thread id (codex: CODEX_THREAD_ID). A shared runtime's session
// teardown kills what is left of them.
type CommandMarker interface {
	CommandEnv() string
}

// RuntimeOptions configures a Runtime over a spawned child.
type RuntimeOptions struct {
	In             io.WriteCloser
	Out            io.Reader
	Logger         *slog.Logger
	RequestTimeout time.Duration
	MaxLineBytes   int
}

// NewRuntime builds a shared Runtime over a spawned child.
type NewRuntime func(RuntimeOptions) Runtime

// Errors of the adapters.
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
	// ErrThreadNotFound means the provider refused to resume the thread it
	// was started for because it no longer has it, and is exiting: the
	// host starts a fresh process for a fresh thread (Options.Replaces).
	ErrThreadNotFound = errors.New("provider has no such thread")
)

// Defaults of Options.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultMaxLineBytes   = 8 << 20
	// DefaultDrainQuiet is the quiet period the host uses after the root exited.
	DefaultDrainQuiet = 100 * time.Millisecond
)

// HandshakeWithin is how long one request of an adapter's Start waits:
// 0, meaning until ctx ends, when ctx has a deadline (the daemon's
// start_timeout, which bounds the whole handshake), else def (the request
// timeout). A start_timeout above the request timeout is then honoured.
func HandshakeWithin(ctx context.Context, def time.Duration) time.Duration {
	if _, ok := ctx.Deadline(); ok {
		return 0
	}
	return def
}

// Timer is a timer of d, or none (a nil channel) when d is 0.
func Timer(d time.Duration) (c <-chan time.Time, stop func() bool) {
	if d <= 0 {
		return nil, func() bool { return false }
	}
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// Options configures an Adapter. In and Out are the child's stdin and
// stdout; Emit receives every event the provider's messages map to.
type Options struct {
	In       io.WriteCloser
	Out      io.Reader
	Cwd      string
	ThreadID string
	// FreshThreadID, when set (ThreadID empty), is the id the daemon minted
	// for a fresh thread and gave the provider on its command line
	// (host.Provider.FreshThread): Start reports it at once.
	FreshThreadID string
	// Emit is called in provider order from the reader goroutine (and from
	// Start/Respond for the events they produce), never concurrently.
	Emit           func(event.Draft)
	Logger         *slog.Logger
	RequestTimeout time.Duration // default 30s
	MaxLineBytes   int           // default 8 MiB
	// OnThreadID, when set, is told a thread id the adapter learns after
	// Start (a Claude Code conversation continued under another session_id
	// than the one it was started with), and FreshThreadID once the
	// provider has begun that thread (its first turn); it runs on the
	// reader goroutine.
	OnThreadID func(threadID string)
	// Replaces, when set, is the thread a fresh start replaces (its resume
	// failed with ErrThreadNotFound in an earlier process): the adapter
	// emits provider.thread_replaced once it knows the new thread's id.
	Replaces *event.ThreadReplacedData
	// Stuck, when set, is called when the provider acknowledged an
	// interrupt but did not end the turn within InterruptTimeout: the
	// adapter has ended the turn `interrupted` (user_cancel) and the host
	// stops the child. Only adapters whose provider can ignore an
	// interrupt call it (claude).
	Stuck            func()
	InterruptTimeout time.Duration // default RequestTimeout
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

// Answer is a client's answer to an approval: a decision among the
// request's options, plus answers (userInput: question id -> chosen
// strings) or content (elicitation: the form's values).
type Answer struct {
	Decision string
	Answers  map[string][]string
	Content  json.RawMessage
	// Origin is the connection that answered: the adapter puts it on the
	// approval.resolved it journals.
	Origin *event.Origin
}

// Decisions a client may give (agent-session.approvals.v2).
const (
	DecisionApprove           = "approve"
	DecisionApproveForSession = "approveForSession"
	DecisionDeny              = "deny"
	DecisionCancel            = "cancel"
)

// ErrDecisionNotAllowed means Respond's decision is not among the
// request's options (wrapped in a *DecisionError naming them).
var ErrDecisionNotAllowed = errors.New("decision not allowed for this request")

// DecisionError names the decisions a request accepts.
type DecisionError struct {
	Decision string
	Allowed  []string
}

func (e *DecisionError) Error() string {
	return fmt.Sprintf("decision %q not allowed; allowed: %v", e.Decision, e.Allowed)
}

func (e *DecisionError) Unwrap() error { return ErrDecisionNotAllowed }

// NotFoundError is ErrThreadNotFound with the provider's own wording.
type NotFoundError struct {
	ThreadID string
	Cause    string // what the provider said
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("resume thread %s: %s", e.ThreadID, e.Cause)
}

func (e *NotFoundError) Unwrap() error { return ErrThreadNotFound }
