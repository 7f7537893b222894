package codex

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/internal/provider"
)

// codex 0.169 keeps a thread in one rollout file,
// CODEX_HOME/sessions/YYYY/MM/DD/rollout-<created>-<threadId>.jsonl
// (written at the thread's first turn), or, once archived, under
// CODEX_HOME/archived_sessions/. thread/resume looks the id up in its state
// DB and, when that has no (existing) path, searches sessions/ for a file
// name holding the id: a copy under the same relative path in another
// home resumes there with its history (measured).
const (
	sessionsDir = "sessions"
	archivedDir = "archived_sessions"
)

// Move is the codex-app-server protocol's provider.Mover: it copies the
// thread's rollout from From's CODEX_HOME (default $HOME/.codex) to the
// same relative path under To's, replacing an older copy there whole and
// removing any other copy of the thread under To's sessions/ and
// archived_sessions/ (codex would find either). From's copy is only read.
// ErrNoThreadCopy when From has none (e.g. a thread never given a turn).
func Move(ctx context.Context, m provider.Move) error {
	if err := checkThreadID(m.ThreadID); err != nil {
		return err
	}
	from, err := codexHome(m.From)
	if err != nil {
		return fmt.Errorf("move thread %s: leaving account: %w", m.ThreadID, err)
	}
	to, err := codexHome(m.To)
	if err != nil {
		return fmt.Errorf("move thread %s: joining account: %w", m.ThreadID, err)
	}
	if filepath.Clean(from) == filepath.Clean(to) {
		return fmt.Errorf("move thread %s: both accounts use CODEX_HOME %s", m.ThreadID, from)
	}
	src, err := findRollout(ctx, from, m.ThreadID)
	if err != nil {
		return fmt.Errorf("move thread %s: %w", m.ThreadID, err)
	}
	rel, err := filepath.Rel(from, src)
	if err != nil {
		return fmt.Errorf("move thread %s: %w", m.ThreadID, err)
	}
	dst := filepath.Join(to, rel)
	if err := provider.CopyThreadFile(src, dst, m.MaxBytes); err != nil {
		return fmt.Errorf("move thread %s: %w", m.ThreadID, err)
	}
	// A stale copy elsewhere in the joining home (another date folder, or
	// archived) could be the one codex finds.
	stale, err := rollouts(ctx, to, m.ThreadID)
	if err != nil {
		return fmt.Errorf("move thread %s: %w", m.ThreadID, err)
	}
	for _, p := range stale {
		if p != dst {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("move thread %s: remove stale copy: %w", m.ThreadID, err)
			}
		}
	}
	return nil
}

// codexHome is the account's CODEX_HOME, else $HOME/.codex.
func codexHome(env func(string) string) (string, error) {
	if h := env("CODEX_HOME"); h != "" {
		return h, nil
	}
	if h := env("HOME"); h != "" {
		return filepath.Join(h, ".codex"), nil
	}
	return "", fmt.Errorf("neither CODEX_HOME nor HOME is set")
}

// checkThreadID refuses an id that is not a codex thread id (a UUID:
// hex digits and '-'), so it can never name a path.
func checkThreadID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("move thread %q: not a codex thread id", truncate([]byte(id), 70))
	}
	for _, c := range id {
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return fmt.Errorf("move thread %q: not a codex thread id", truncate([]byte(id), 70))
		}
	}
	return nil
}

// findRollout is the thread's rollout under home: the newest one under
// sessions/, else under archived_sessions/; ErrNoThreadCopy when none.
func findRollout(ctx context.Context, home, threadID string) (string, error) {
	for _, sub := range []string{sessionsDir, archivedDir} {
		ps, err := rolloutsIn(ctx, filepath.Join(home, sub), threadID)
		if err != nil {
			return "", err
		}
		best, bestT := "", int64(0)
		for _, p := range ps {
			if st, err := os.Stat(p); err == nil && (best == "" || st.ModTime().UnixNano() > bestT) {
				best, bestT = p, st.ModTime().UnixNano()
			}
		}
		if best == "" && len(ps) > 0 {
			best = ps[0] // unreadable metadata: CopyThreadFile names the error
		}
		if best != "" {
			return best, nil
		}
	}
	return "", fmt.Errorf("no rollout of the thread under %s: %w", home, provider.ErrNoThreadCopy)
}

// rollouts lists every copy of the thread under home's sessions/ and
// archived_sessions/.
func rollouts(ctx context.Context, home, threadID string) ([]string, error) {
	var out []string
	for _, sub := range []string{sessionsDir, archivedDir} {
		ps, err := rolloutsIn(ctx, filepath.Join(home, sub), threadID)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// rolloutsIn walks dir for rollout-*-<threadID>.jsonl (a missing dir:
// none; an unreadable one: an error naming it).
func rolloutsIn(ctx context.Context, dir, threadID string) ([]string, error) {
	suffix := "-" + strings.ToLower(threadID) + ".jsonl"
	var out []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && os.IsNotExist(err) {
				return fs.SkipAll
			}
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		name := strings.ToLower(de.Name())
		if !de.IsDir() && strings.HasPrefix(name, "rollout-") && strings.HasSuffix(name, suffix) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look for the thread's rollout under %s: %w", dir, err)
	}
	return out, nil
}
