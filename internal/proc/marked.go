package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
)

// ErrBadMark is Marked's error for a scope or a mark it cannot look for.
var ErrBadMark = errors.New("proc: Marked")

// Marked lists the live (non-zombie) processes, other than the caller,
// inside scope whose environment also holds exactly key=value, by
// identity (pid and start time: safe to signal later), sorted by pid.
// It finds what a provider marked as one thread's own (codex sets
// CODEX_THREAD_ID on every command it runs) inside a shared runtime's
// tree. scope needs its StateID and one owner (RuntimeID or SessionID):
// processes of another runtime, session or daemon are never listed.
// ErrCannotEnumerate when the process table cannot be read: it never
// answers "none" when it could not look. Processes whose environment
// cannot be read (another user's, gone meanwhile) are left out.
func Marked(scope Tags, key, value string) ([]Identity, error) {
	switch {
	case scope.empty():
		return nil, fmt.Errorf("%w: scope needs a state id and a runtime or session id, got %+v", ErrBadMark, scope)
	case key == "" || strings.ContainsAny(key, "=\x00") || strings.ContainsRune(value, 0) || value == "":
		return nil, fmt.Errorf("%w: want a NAME and a VALUE without NUL (NAME without '='), got %q=%q", ErrBadMark, key, value)
	}
	r, err := newStatReader()
	if err != nil {
		return nil, err
	}
	defer r.close()
	boot, err := BootID()
	if err != nil {
		return nil, errors.Join(ErrCannotEnumerate, err)
	}
	pids, err := listPIDs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	want := []byte(key + "=" + value)
	var out []Identity
	var env []byte
	for _, pid := range pids {
		if pid == self {
			continue
		}
		st, err := r.read(pid)
		if err != nil || st.zombie() {
			continue
		}
		if env, err = r.environ(pid, env); err != nil {
			continue
		}
		if got, _ := envTags(env); !scope.matches(got) || !hasEntry(env, want) {
			continue
		}
		out = append(out, Identity{PID: pid, StartTicks: st.StartTicks, BootID: boot})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// hasEntry reports whether the NUL-separated environment holds entry.
func hasEntry(environ, entry []byte) bool {
	for len(environ) > 0 {
		kv := environ
		if j := bytes.IndexByte(environ, 0); j >= 0 {
			kv, environ = environ[:j], environ[j+1:]
		} else {
			environ = nil
		}
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// StopMarked runs the ladder's signals on marked and their descendants
// only (no tag match: the rest of the tree they are tagged with is not
// touched) and returns the verdict.
func StopMarked(ctx context.Context, log *slog.Logger, marked []Identity, l Ladder) Verdict {
	return reapTree(ctx, orDiscard(log), Identity{}, marked, Tags{}, l)
}
