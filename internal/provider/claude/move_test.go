package claude

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/testkit/movetest"
)

const moveSession = "dafb7a36-5625-45b6-95c4-634b671195f0"

// The key Claude Code 2.1.328 gave these directories (measured with the
// real CLI).
func TestProjectKey(t *testing.T) {
	for cwd, want := range map[string]string{
		"/tmp/TestZZClaude3418770758/001/a.b_c d/Ünï~x": "-tmp-TestZZClaude3418770758-001-a-b-c-d--n--x",
		"/tmp/x/e😀f": "-tmp-x-e--f",
	} {
		if got := ProjectKey(cwd); got != want {
			t.Errorf("ProjectKey(%q) = %q, want %q", cwd, got, want)
		}
	}
}

// The transcript lands under the same project key in the joining config
// dir, byte for byte, replacing an older copy whole; the leaving copy is
// not written; a transcript under another key (a long cwd's hashed key)
// is found by its session id.
func TestMoveCopiesTranscript(t *testing.T) {
	cwd := "/work/some project"
	for name, key := range map[string]string{"cwd key": ProjectKey(cwd), "other key": "-a-long-key-rsy2sj"} {
		t.Run(name, func(t *testing.T) {
			a, b := t.TempDir(), t.TempDir()
			rel := filepath.Join("projects", key, moveSession+".jsonl")
			body := `{"type":"user","message":"pineapple-42"}` + "\n"
			movetest.WriteFile(t, filepath.Join(a, rel), body)
			movetest.WriteFile(t, filepath.Join(b, rel), strings.Repeat("stale and longer\n", 10))
			before, _ := os.Stat(filepath.Join(a, rel))
			m := provider.Move{From: movetest.Env("CLAUDE_CONFIG_DIR", a), To: movetest.Env("CLAUDE_CONFIG_DIR", b), ThreadID: moveSession, Cwd: cwd}
			if err := Move(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			if got := movetest.ReadFile(t, filepath.Join(b, rel)); got != body {
				t.Fatalf("joining copy %q", got)
			}
			after, _ := os.Stat(filepath.Join(a, rel))
			if movetest.ReadFile(t, filepath.Join(a, rel)) != body || !after.ModTime().Equal(before.ModTime()) {
				t.Fatal("leaving copy written")
			}
		})
	}
}

// CLAUDE_CONFIG_DIR unset: $HOME/.claude.
func TestMoveDefaultConfigDir(t *testing.T) {
	ha, hb := t.TempDir(), t.TempDir()
	rel := filepath.Join(".claude", "projects", "-w", moveSession+".jsonl")
	movetest.WriteFile(t, filepath.Join(ha, rel), "x\n")
	if err := Move(context.Background(), provider.Move{From: movetest.Env("HOME", ha), To: movetest.Env("HOME", hb), ThreadID: moveSession, Cwd: "/w"}); err != nil {
		t.Fatal(err)
	}
	if movetest.ReadFile(t, filepath.Join(hb, rel)) != "x\n" {
		t.Fatal("not copied into $HOME/.claude")
	}
}

// What a move refuses; the joining dir's older copy stays whole.
func TestMoveRefusals(t *testing.T) {
	rel := filepath.Join("projects", "-w", moveSession+".jsonl")
	cases := []struct {
		name  string
		setup func(t *testing.T, a, b string) provider.Move
		is    error
		want  string
	}{
		{"no copy", func(t *testing.T, a, b string) provider.Move {
			return provider.Move{From: movetest.Env("CLAUDE_CONFIG_DIR", a), To: movetest.Env("CLAUDE_CONFIG_DIR", b), ThreadID: moveSession}
		}, provider.ErrNoThreadCopy, "no transcript"},
		{"too large", func(t *testing.T, a, b string) provider.Move {
			movetest.WriteFile(t, filepath.Join(a, rel), strings.Repeat("x", 100))
			return provider.Move{From: movetest.Env("CLAUDE_CONFIG_DIR", a), To: movetest.Env("CLAUDE_CONFIG_DIR", b), ThreadID: moveSession, MaxBytes: 10}
		}, provider.ErrThreadCopyTooLarge, "over the bound of 10"},
		{"target not writable", func(t *testing.T, a, b string) provider.Move {
			movetest.WriteFile(t, filepath.Join(a, rel), "x\n")
			file := filepath.Join(b, "dir-is-a-file")
			movetest.WriteFile(t, file, "")
			return provider.Move{From: movetest.Env("CLAUDE_CONFIG_DIR", a), To: movetest.Env("CLAUDE_CONFIG_DIR", file), ThreadID: moveSession}
		}, nil, "dir-is-a-file"},
		{"dot-dot id", func(t *testing.T, a, b string) provider.Move {
			return provider.Move{From: movetest.Env("CLAUDE_CONFIG_DIR", a), To: movetest.Env("CLAUDE_CONFIG_DIR", b), ThreadID: ".."}
		}, nil, "not a Claude session id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := t.TempDir(), t.TempDir()
			movetest.WriteFile(t, filepath.Join(b, rel), "older copy\n")
			err := Move(context.Background(), c.setup(t, a, b))
			if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %v saying %q", err, c.is, c.want)
			}
			if movetest.ReadFile(t, filepath.Join(b, rel)) != "older copy\n" {
				t.Fatal("older copy changed")
			}
		})
	}
}
