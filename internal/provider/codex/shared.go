package codex

import (
	"io"

	"github.com/sessiond/sessiond/internal/provider"
)

// The adapter interface's types and errors, under the names this package
// has always used.
type (
	Options       = provider.Options
	StartResult   = provider.StartResult
	Answer        = provider.Answer
	DecisionError = provider.DecisionError
)

var (
	ErrExited             = provider.ErrExited
	ErrRequestNotFound    = provider.ErrRequestNotFound
	ErrTurnRunning        = provider.ErrTurnRunning
	ErrNotStarted         = provider.ErrNotStarted
	ErrTimeout            = provider.ErrTimeout
	ErrStopping           = provider.ErrStopping
	ErrDecisionNotAllowed = provider.ErrDecisionNotAllowed
	errLineTooLong        = provider.ErrLineTooLong
)

const (
	DefaultRequestTimeout     = provider.DefaultRequestTimeout
	DefaultMaxLineBytes       = provider.DefaultMaxLineBytes
	DefaultDrainQuiet         = provider.DefaultDrainQuiet
	DecisionApprove           = provider.DecisionApprove
	DecisionApproveForSession = provider.DecisionApproveForSession
	DecisionDeny              = provider.DecisionDeny
	DecisionCancel            = provider.DecisionCancel
)

// New is the codex-app-server protocol's provider.New.
func New(o provider.Options) provider.Adapter { return NewAdapter(o) }

// Runtime is the codex-app-server protocol's provider.NewRuntime: it can share.
var _ provider.NewRuntime = NewRuntime

func newLineReader(r io.Reader, max int) *provider.LineReader { return provider.NewLineReader(r, max) }
