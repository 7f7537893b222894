package proc

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
)

// Marked lists the live processes that carry tags' state and session id
// and whose environment also holds key=value: the processes a provider
// marked as one thread's own (codex sets CODEX_THREAD_ID on every
// command it runs) inside a shared runtime's tree.
func Marked(tags Tags, key, value string) ([]Identity, error) {
	if tags.StateID == "" || tags.SessionID == "" || key == "" || value == "" {
		return nil, errors.New("proc: Marked: empty tags, key or value")
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
	want := []byte(key + "=" + value)
	var out []Identity
	var env []byte
	for _, pid := range pids {
		st, err := r.read(pid)
		if err != nil || st.zombie() {
			continue
		}
		if env, err = r.environ(pid, env); err != nil {
			continue
		}
		if got, _ := envTags(env); got.StateID != tags.StateID || got.SessionID != tags.SessionID || !hasEntry(env, want) {
			continue
		}
		out = append(out, Identity{PID: pid, StartTicks: st.StartTicks, BootID: boot})
	}
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
