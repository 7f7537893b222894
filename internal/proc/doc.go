// Package proc is the part of sessiond that must never lose a process: it
// spawns provider children in their own process group with env tags, knows a
// process by its identity (pid + start ticks + boot id), probes many
// identities in one sweep, finds a session's process tree (tagged processes,
// the root's group, the root's descendants recorded before any signal), runs
// the close ladder and returns a verdict, and re-ladders trees not proven gone
// on a bounded schedule.
//
// Safety rule: a pid that is not our own waited-on child is never signalled
// without re-checking its identity immediately before, through a pidfd where
// the kernel has them, so a reused pid is never hit.
//
// Linux is the supported platform. Elsewhere the package builds, spawns and
// waits, but whatever it cannot see answers Unverifiable (or
// ErrCannotEnumerate), never "gone".
package proc

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Env tag names. A per-session provider child (and its descendants)
// carries the session id, the fence and the state id; a shared runtime's
// process carries the runtime id and the state id, and no session's id
// (it serves many).
const (
	EnvSessionID = "SESSIOND_SESSION_ID"
	EnvFence     = "SESSIOND_FENCE"
	EnvStateID   = "SESSIOND_STATE_ID"
	EnvRuntimeID = "SESSIOND_RUNTIME_ID"
)

// Errors of spawning.
var (
	// ErrSpawn: the child could not be started (pipes, exec).
	ErrSpawn = errors.New("proc: spawn failed")
)

// Errors of looking at processes.
var (
	// ErrCannotEnumerate: the process table could not be read, so nothing can
	// be said about which processes exist (never read as "none").
	ErrCannotEnumerate = errors.New("proc: cannot enumerate processes")
	// ErrUnsupported: the platform cannot do this (e.g. no /proc, no prctl).
	ErrUnsupported = errors.New("proc: unsupported on this platform")
	// ErrReaperRunning: SetSubreaper was called while its reaper already runs.
	ErrReaperRunning = errors.New("proc: subreaper already running")
)

// Identity names one process across pid reuse and reboots.
type Identity struct {
	PID        int
	StartTicks uint64 // field 22 of /proc/<pid>/stat: clock ticks after boot
	BootID     string // /proc/sys/kernel/random/boot_id
}

func (id Identity) String() string {
	return fmt.Sprintf("pid %d (start %d)", id.PID, id.StartTicks)
}

// State is what a probe found about an identity.
type State int

// Probe results. Only Alive means the identified process runs; a zombie is
// not alive.
const (
	Alive State = iota
	PidAbsent
	IdentityMismatch
	BootChanged
)

// Unverifiable is both a State (the probe could not look) and an Outcome
// (the ladder could not prove exit): an untyped constant, so either type
// holds it and docs/internals.md's names stay as written.
const Unverifiable = 4

var stateNames = [...]string{
	Alive:            "alive",
	PidAbsent:        "pid-absent",
	IdentityMismatch: "identity-mismatch",
	BootChanged:      "boot-changed",
	Unverifiable:     "unverifiable",
}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Gone reports whether the state proves the identified process is not running.
func (s State) Gone() bool {
	return s == PidAbsent || s == IdentityMismatch || s == BootChanged
}

// Tags are the env tags that mark a session's processes, or a shared
// runtime's: either SessionID (with its Fence) or RuntimeID names the
// owner, under StateID.
type Tags struct {
	SessionID string
	Fence     uint64 // 0 matches any fence when scanning
	StateID   string
	RuntimeID string // a shared runtime's (r_…); matched instead of SessionID when set
}

// Env returns the tags as environment entries: the session's id and
// fence when set, the runtime's id when set, the state id always.
func (t Tags) Env() []string {
	var env []string
	if t.SessionID != "" {
		env = append(env, EnvSessionID+"="+t.SessionID, EnvFence+"="+fmt.Sprint(t.Fence))
	}
	if t.RuntimeID != "" {
		env = append(env, EnvRuntimeID+"="+t.RuntimeID)
	}
	return append(env, EnvStateID+"="+t.StateID)
}

// Owner is the id the tags name: the runtime's when set, else the session's.
func (t Tags) Owner() string {
	if t.RuntimeID != "" {
		return t.RuntimeID
	}
	return t.SessionID
}

// empty reports whether the tags name no session and no runtime (they
// match nothing).
func (t Tags) empty() bool { return t.Owner() == "" || t.StateID == "" }

// Ladder is the close ladder's timing.
type Ladder struct {
	Grace       time.Duration // after closing stdin, before SIGTERM
	TermTimeout time.Duration // after SIGTERM, before SIGKILL
	KillTimeout time.Duration // after SIGKILL, before giving a verdict
}

// Outcome is one half of a Verdict.
type Outcome int

// Outcomes of stopping a root or a tree (and Unverifiable).
const (
	Exited Outcome = iota
	Live
)

var outcomeNames = [...]string{Exited: "exited", Live: "live", Unverifiable: "unverifiable"}

func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) && outcomeNames[o] != "" {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Verdict is what the close ladder (or Reap) proved.
type Verdict struct {
	Root, Tree Outcome
	Code       *int   // root's exit code, when it exited normally and we waited on it
	Signal     string // signal that ended the root ("SIGKILL"), when known
	Signalled  bool   // whether any signal was sent to anyone
	Survivors  []Identity

	cgroup *sessionCgroup // cgroup mode: the cgroup still populated (Tree not Exited)
}

// Exit is how a waited-on child ended.
type Exit struct {
	Code   *int
	Signal string
}

// attr is the owner as a log attribute: runtime_id for a runtime's tags,
// else session_id.
func (t Tags) attr() slog.Attr {
	if t.RuntimeID != "" {
		return slog.String("runtime_id", t.RuntimeID)
	}
	return slog.String("session_id", t.SessionID)
}
