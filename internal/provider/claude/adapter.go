// Package claude is the client side of Claude Code's stream-json protocol
// (`claude -p --input-format stream-json --output-format stream-json
// --verbose --include-partial-messages --permission-prompt-tool stdio`):
// newline-delimited JSON messages on stdio. The session's thread id is
// Claude's session_id; a turn is one `user` message and ends with its
// `result`; cancel is a control_request {subtype:"interrupt"}; approvals
// are the CLI's can_use_tool control requests, answered with a
// control_response. The message types are those of the Claude Agent
// SDK's message union (sdk.d.ts); every one is mapped, on the ignore
// list, or journaled as provider.notice (tables.go).
//
// Concurrency: one reader goroutine handles stdout in order. Lock order:
// emitMu, then mu; the stdin lock is a leaf.
package claude

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// Adapter drives one Claude Code child over its stdio.
type Adapter struct {
	o     provider.Options
	log   *slog.Logger
	out   *provider.ActivityReader
	stdin *provider.Stdin

	done     chan struct{} // closed when the reader stopped and emitted everything
	stopping chan struct{} // closed by BeginStop
	stopOnce sync.Once

	emitMu  sync.Mutex
	stopped bool

	mu        sync.Mutex
	nextID    int64
	calls     map[string]chan controlResponse // our control requests waiting
	threadID  string
	begun     bool                 // the CLI has the conversation (a resume, or an init named it)
	started   bool                 // Start succeeded
	startErr  chan string          // a result read while Start waits (a failed resume)
	turn      *openTurn            // nil when none
	approvals map[string]*approval // request_id -> pending can_use_tool
	approvalN int64
	warned    map[string]bool
	blocks    map[string]*block // streamed content blocks by message id + index
	tools     map[string]*tool  // tool_use id -> its open item
	denied    map[string]bool   // tool_use ids the user denied
	stuck     *time.Timer       // armed by an acknowledged interrupt
	pause     *pauseReq         // a live upgrade's Pause in progress (handoff.go)
	// limitResets: Unix seconds when a rejected rate limit lifts, from the
	// latest rate_limit_event (0: none; ratelimit.go).
	limitResets int64
}

type openTurn struct {
	ours        string
	interrupted bool
}

// New is the claude-stream-json protocol's provider.New.
func New(o provider.Options) provider.Adapter { return NewAdapter(o) }

// NewAdapter returns an adapter and starts its reader on o.Out.
func NewAdapter(o provider.Options) *Adapter {
	a := newAdapter(o)
	go a.readLoop()
	return a
}

// newAdapter is an adapter whose reader is not started yet.
func newAdapter(o provider.Options) *Adapter {
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
		o: o, log: o.Logger, out: provider.NewActivityReader(o.Out), stdin: provider.NewStdin(o.In, o.RequestTimeout),
		done: make(chan struct{}), stopping: make(chan struct{}), startErr: make(chan string, 1),
		calls: map[string]chan controlResponse{}, approvals: map[string]*approval{}, warned: map[string]bool{},
		blocks: map[string]*block{}, tools: map[string]*tool{}, denied: map[string]bool{},
		threadID: o.ThreadID, // a resume's (on the command line): an init naming another is a change
		begun:    o.ThreadID != "",
	}
	if a.threadID == "" {
		a.threadID = o.FreshThreadID // ours, on the command line (--session-id)
	}
	return a
}

// Done is closed once the reader finished and everything read was emitted.
func (a *Adapter) Done() <-chan struct{} { return a.done }

// Busy reports an open turn or an unanswered approval.
func (a *Adapter) Busy() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.turn != nil || len(a.approvals) > 0
}

// ThreadID is Claude's session_id: the resumed one, or the one the daemon
// minted for a fresh conversation (Options.FreshThreadID), or, without
// either, a fresh conversation's once its first init named it.
func (a *Adapter) ThreadID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.threadID
}

// Drain waits for stdout's end or `quiet` of silence, then stops emitting.
func (a *Adapter) Drain(ctx context.Context, quiet time.Duration) error {
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

// BeginStop is CancelWrites, and every waiting control request returns
// ErrStopping.
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

// anomaly logs a protocol oddity: the first of each kind at warn level,
// later ones at debug.
func (a *Adapter) anomaly(kind string, args ...any) {
	a.mu.Lock()
	first := !a.warned[kind]
	a.warned[kind] = true
	a.mu.Unlock()
	lvl := slog.LevelDebug
	if first {
		lvl = slog.LevelWarn
	}
	a.log.Log(context.Background(), lvl, "provider protocol anomaly", append([]any{"kind", kind}, args...)...)
}

// notice journals a provider.notice in the open turn, if any.
func (a *Adapter) notice(level, code, msg string) {
	a.emit(event.New(event.ProviderNotice, a.turnID(), event.NoticeData{Level: level, Message: capText(msg, 4096), Code: code}))
}

// noticeOnce journals a notice the first time key is seen.
func (a *Adapter) noticeOnce(key, level, code, msg string) {
	a.mu.Lock()
	first := !a.warned["notice:"+key]
	a.warned["notice:"+key] = true
	a.mu.Unlock()
	if first {
		a.notice(level, code, msg)
	}
}
