package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"
)

// A live upgrade hands a running adapter to the next image of the daemon:
// the reader is stopped at a message boundary (Pause), its protocol state
// and the bytes it read but did not parse go into the handoff, and the new
// image builds an adapter around the same pipes from them (Adopt). Nothing
// is written to the provider and nothing is re-sent: the child never
// learns its daemon changed.

// Paused is an adapter stopped for a handoff: the stdout bytes already read
// but not parsed (the start of a line the pause cut), and the protocol's
// own state (thread, open turn, pending request ids, …) as JSON.
type Paused struct {
	Unparsed []byte          `json:"unparsed,omitempty"`
	State    json.RawMessage `json:"state"`
}

// Handover is an Adapter that can be handed over. Pause stops the reader
// at a message boundary (a line already being handled is finished) and
// returns its state; nothing is emitted until Resume (the upgrade was
// abandoned) or the process is replaced. Pause fails, leaving the adapter
// running, when the provider exited or a request of ours is still waiting
// for its answer.
type Handover interface {
	Pause(ctx context.Context) (Paused, error)
	Resume()
}

// Adopt builds an adapter of one protocol over inherited stdio from a
// Paused state, without any exchange with the provider.
type Adopt func(Options, Paused) (Adapter, error)

// Errors of a handover.
var (
	// ErrNoHandover means the adapter cannot be handed over (its protocol
	// does not implement it, or its stdout cannot be paused).
	ErrNoHandover = errors.New("adapter cannot be handed over")
	// ErrRequestInFlight means one of our requests to the provider is still
	// waiting for its answer: its reply could not be matched after the exec.
	ErrRequestInFlight = errors.New("a request to the provider is waiting for its answer")
)

// ReadDeadliner is a stdout whose reads can be stopped (an *os.File pipe).
type ReadDeadliner interface {
	SetReadDeadline(t time.Time) error
}

// Prefixed reads prefix, then r; Close closes r and SetReadDeadline
// reaches it: the stdout of an adopted child, with the bytes the previous
// image had read and not parsed in front.
type Prefixed struct {
	io.Reader
	r io.Reader
}

// NewPrefixed returns prefix followed by r.
func NewPrefixed(prefix []byte, r io.Reader) *Prefixed {
	return &Prefixed{Reader: io.MultiReader(bytes.NewReader(append([]byte(nil), prefix...)), r), r: r}
}

// Close closes the underlying reader when it is an io.Closer.
func (p *Prefixed) Close() error {
	if c, ok := p.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// SetReadDeadline sets the underlying reader's deadline.
func (p *Prefixed) SetReadDeadline(t time.Time) error {
	if d, ok := p.r.(ReadDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return ErrNoHandover
}

// A shared runtime is handed over the same way, once for its process: its
// reader is parked at a message boundary (which parks every thread on it),
// the runtime's own state (request-id space, loaded threads) and each
// thread's protocol state are serialised, and the new image rebuilds the
// runtime, installs every thread, and only then starts the reader.

// RuntimeHandover is a Runtime that can be handed over. Pause parks the
// reader and returns the runtime's state; ThreadState, while paused,
// returns the state of one of its threads. Pause fails, leaving the
// runtime running, when the process exited or a request of any thread is
// still waiting for its answer.
type RuntimeHandover interface {
	Pause(ctx context.Context) (Paused, error)
	ThreadState(t Thread) (json.RawMessage, error)
	Resume()
}

// AdoptedRuntime is a Runtime rebuilt from a handoff whose reader has not
// started: AdoptThread installs each handed-over thread, then Start starts
// the reader (a line read before its thread is installed would be an
// unknown thread's).
type AdoptedRuntime interface {
	Runtime
	AdoptThread(o Options, state json.RawMessage) (Thread, error)
	Start()
}

// AdoptRuntime builds a runtime of one protocol over an adopted child's
// stdio from a Paused state, without any exchange with the provider.
type AdoptRuntime func(RuntimeOptions, Paused) (AdoptedRuntime, error)
