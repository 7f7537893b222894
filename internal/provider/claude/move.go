package claude

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/internal/provider"
)

// Claude Code 2.1.328 keeps a conversation in
// CLAUDE_CONFIG_DIR/projects/<cwd key>/<session id>.jsonl, the key being
// the working directory with every UTF-16 code unit other than an ASCII
// letter or digit replaced by '-' ("/tmp/a.b c" → "-tmp-a-b-c"), and a key
// over 200 characters cut to 200 plus '-' and a hash (measured). `--resume
// ID` in another config dir finds the transcript under the key of its own
// cwd: a copy under the same relative path resumes with its history.
const projectsDir = "projects"

// Move is the claude-stream-json protocol's provider.Mover: it copies the
// conversation's transcript from From's CLAUDE_CONFIG_DIR (default
// $HOME/.claude) to the same relative path under To's, replacing an older
// copy whole. The transcript is found by its session id under any project
// key (the one of m.Cwd preferred), so no key is recomputed. From's copy is
// only read. ErrNoThreadCopy when From has none.
func Move(ctx context.Context, m provider.Move) error {
	id := m.ThreadID
	if !validSessionID(id) || strings.Trim(id, ".") == "" {
		return fmt.Errorf("move conversation %q: not a Claude session id", capText(id, 70))
	}
	from, err := configDir(m.From)
	if err != nil {
		return fmt.Errorf("move conversation %s: leaving account: %w", id, err)
	}
	to, err := configDir(m.To)
	if err != nil {
		return fmt.Errorf("move conversation %s: joining account: %w", id, err)
	}
	if filepath.Clean(from) == filepath.Clean(to) {
		return fmt.Errorf("move conversation %s: both accounts use CLAUDE_CONFIG_DIR %s", id, from)
	}
	src, err := findTranscript(ctx, from, id, m.Cwd)
	if err != nil {
		return fmt.Errorf("move conversation %s: %w", id, err)
	}
	rel, err := filepath.Rel(from, src)
	if err != nil {
		return fmt.Errorf("move conversation %s: %w", id, err)
	}
	if err := provider.CopyThreadFile(src, filepath.Join(to, rel), m.MaxBytes); err != nil {
		return fmt.Errorf("move conversation %s: %w", id, err)
	}
	return nil
}

// configDir is the account's CLAUDE_CONFIG_DIR, else $HOME/.claude.
func configDir(env func(string) string) (string, error) {
	if d := env("CLAUDE_CONFIG_DIR"); d != "" {
		return d, nil
	}
	if h := env("HOME"); h != "" {
		return filepath.Join(h, ".claude"), nil
	}
	return "", fmt.Errorf("neither CLAUDE_CONFIG_DIR nor HOME is set")
}

// ProjectKey is the directory name Claude Code 2.1.328 gives cwd under
// projects/ when it is at most 200 characters (longer ones end in a hash
// this package does not compute).
func ProjectKey(cwd string) string {
	var b strings.Builder
	for _, r := range cwd {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r > 0xFFFF: // two UTF-16 code units
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// findTranscript is projects/*/<id>.jsonl under dir: the one under cwd's
// key when there, else the newest; ErrNoThreadCopy when none.
func findTranscript(ctx context.Context, dir, id, cwd string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	root := filepath.Join(dir, projectsDir)
	if cwd != "" {
		p := filepath.Join(root, ProjectKey(cwd), id+".jsonl")
		if _, err := os.Lstat(p); err == nil {
			return p, nil
		}
	}
	keys, err := os.ReadDir(root)
	if err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("look for the transcript under %s: %w", root, err)
	}
	best, bestT := "", int64(0)
	for _, k := range keys {
		if !k.IsDir() {
			continue
		}
		p := filepath.Join(root, k.Name(), id+".jsonl")
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if best == "" || st.ModTime().UnixNano() > bestT {
			best, bestT = p, st.ModTime().UnixNano()
		}
	}
	if best == "" {
		return "", fmt.Errorf("no transcript of the conversation under %s: %w", root, provider.ErrNoThreadCopy)
	}
	return best, nil
}
