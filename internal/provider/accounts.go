package provider

import (
	"context"
	"errors"
)

// Move is one thread carried between two accounts of a profile: the
// thread's persisted copy (codex: its rollout under CODEX_HOME/sessions;
// Claude: its transcript under CLAUDE_CONFIG_DIR/projects) is copied from
// the account it leaves into the one it joins, so the target account's
// process resumes it by id with its history.
type Move struct {
	// From and To look up a variable of the leaving and the joining
	// account's environment as its process gets it (the daemon's
	// environment overlaid with the profile's and the account's env): "" when
	// unset.
	From, To func(key string) string
	ThreadID string
	// Cwd is the session's working directory (Claude keys transcripts by it).
	Cwd string
	// MaxBytes bounds the copy (0: DefaultMoveMaxBytes); a larger copy is
	// refused with an error naming the size and the bound.
	MaxBytes int64
}

// DefaultMoveMaxBytes bounds one thread copy.
const DefaultMoveMaxBytes = 256 << 20

// Mover carries a thread between accounts without any process running
// (one per protocol that can; nil: the protocol keeps no copy to carry,
// and a switch is portable). It never writes the leaving account's copy,
// and replaces an older copy in the joining account whole (written to a
// temporary name, then renamed). ErrNoThreadCopy: the leaving account
// has no copy of the thread.
type Mover func(ctx context.Context, m Move) error

// ErrNoThreadCopy means the account a thread leaves holds no copy of it:
// the switch falls back to the portable history.
var ErrNoThreadCopy = errors.New("the account holds no copy of the thread")
