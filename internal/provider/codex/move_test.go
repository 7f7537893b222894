package codex

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

const moveThread = "01a23551-73d9-7113-9578-f32eef000c4c"

var moveRel = filepath.Join("sessions", "2026", "12", "02", "rollout-2026-12-02T05-54-20-"+moveThread+".jsonl")

// noTemp fails when a temporary file of a copy is left in dir.
func noTemp(t *testing.T, dir string) {
	t.Helper()
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file left: %s", filepath.Join(dir, e.Name()))
		}
	}
}

func moveOf(a, b string) provider.Move {
	return provider.Move{From: movetest.Env("CODEX_HOME", a), To: movetest.Env("CODEX_HOME", b), ThreadID: moveThread}
}

// The rollout lands under the same relative path in the joining home,
// byte for byte; the leaving home's copy is not written; an older copy
// in the joining home is replaced whole, and a stale one elsewhere in it
// (another date folder, archived) is removed.
func TestMoveCopiesRollout(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	body := `{"type":"session_meta"}` + "\n" + `{"type":"response_item","text":"pineapple-42"}` + "\n"
	movetest.WriteFile(t, filepath.Join(a, moveRel), body)
	movetest.WriteFile(t, filepath.Join(b, moveRel), strings.Repeat("stale and longer\n", 20))
	staleArchived := filepath.Join(b, "archived_sessions", "rollout-2026-11-01T00-00-00-"+moveThread+".jsonl")
	movetest.WriteFile(t, staleArchived, "old\n")
	other := filepath.Join(b, "sessions", "2026", "12", "02", "rollout-2026-12-02T05-54-20-01a23551-0000-0000-0000-000000000000.jsonl")
	movetest.WriteFile(t, other, "another thread\n")
	before, _ := os.Stat(filepath.Join(a, moveRel))
	if err := Move(context.Background(), moveOf(a, b)); err != nil {
		t.Fatal(err)
	}
	if got := movetest.ReadFile(t, filepath.Join(b, moveRel)); got != body {
		t.Fatalf("joining copy %q, want %q", got, body)
	}
	after, _ := os.Stat(filepath.Join(a, moveRel))
	if got := movetest.ReadFile(t, filepath.Join(a, moveRel)); got != body || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("leaving copy written: %q (mtime %v → %v)", got, before.ModTime(), after.ModTime())
	}
	if _, err := os.Stat(staleArchived); !os.IsNotExist(err) {
		t.Fatalf("stale archived copy kept: %v", err)
	}
	if movetest.ReadFile(t, other) != "another thread\n" {
		t.Fatal("another thread's rollout touched")
	}
	noTemp(t, filepath.Dir(filepath.Join(b, moveRel)))
	// And back: B's newer copy replaces A's.
	movetest.WriteFile(t, filepath.Join(b, moveRel), body+`{"turn":2}`+"\n")
	if err := Move(context.Background(), moveOf(b, a)); err != nil {
		t.Fatal(err)
	}
	if got := movetest.ReadFile(t, filepath.Join(a, moveRel)); got != body+`{"turn":2}`+"\n" {
		t.Fatalf("moved back: %q", got)
	}
}

// An archived thread is copied to the same place under archived_sessions.
func TestMoveArchived(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	rel := filepath.Join("archived_sessions", "rollout-2026-12-02T05-54-20-"+moveThread+".jsonl")
	movetest.WriteFile(t, filepath.Join(a, rel), "x\n")
	if err := Move(context.Background(), moveOf(a, b)); err != nil {
		t.Fatal(err)
	}
	if movetest.ReadFile(t, filepath.Join(b, rel)) != "x\n" {
		t.Fatal("archived copy not moved")
	}
}

// CODEX_HOME unset: $HOME/.codex, as codex itself.
func TestMoveDefaultHome(t *testing.T) {
	ha, hb := t.TempDir(), t.TempDir()
	movetest.WriteFile(t, filepath.Join(ha, ".codex", moveRel), "x\n")
	m := provider.Move{From: movetest.Env("HOME", ha), To: movetest.Env("HOME", hb), ThreadID: moveThread}
	if err := Move(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if movetest.ReadFile(t, filepath.Join(hb, ".codex", moveRel)) != "x\n" {
		t.Fatal("not copied into $HOME/.codex")
	}
}

// What a move refuses, each naming what is wrong; the joining home's
// older copy is left whole and no temporary file stays.
func TestMoveRefusals(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, a, b string) provider.Move
		is    error
		want  string // in the message
	}{
		{"no copy", func(t *testing.T, a, b string) provider.Move { return moveOf(a, b) }, provider.ErrNoThreadCopy, a0},
		{"too large", func(t *testing.T, a, b string) provider.Move {
			movetest.WriteFile(t, filepath.Join(a, moveRel), strings.Repeat("x", 100))
			m := moveOf(a, b)
			m.MaxBytes = 99
			return m
		}, provider.ErrThreadCopyTooLarge, "100 bytes, over the bound of 99"},
		{"unreadable", func(t *testing.T, a, b string) provider.Move {
			// A symlink to a directory: it opens, its read fails.
			if err := os.MkdirAll(filepath.Dir(filepath.Join(a, moveRel)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(t.TempDir(), filepath.Join(a, moveRel)); err != nil {
				t.Fatal(err)
			}
			return moveOf(a, b)
		}, nil, "not a regular file"},
		{"target not writable", func(t *testing.T, a, b string) provider.Move {
			movetest.WriteFile(t, filepath.Join(a, moveRel), "x\n")
			file := filepath.Join(b, "home-is-a-file")
			movetest.WriteFile(t, file, "")
			return moveOf(a, file)
		}, nil, "home-is-a-file"},
		{"same home", func(t *testing.T, a, b string) provider.Move { return moveOf(a, a) }, nil, "both accounts"},
		{"path in the id", func(t *testing.T, a, b string) provider.Move {
			m := moveOf(a, b)
			m.ThreadID = "../../etc/passwd"
			return m
		}, nil, "not a codex thread id"},
		{"no home", func(t *testing.T, a, b string) provider.Move {
			m := moveOf(a, b)
			m.From = movetest.Env()
			return m
		}, nil, "neither CODEX_HOME nor HOME"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := t.TempDir(), t.TempDir()
			old := filepath.Join(b, moveRel)
			movetest.WriteFile(t, old, "older copy\n")
			err := Move(context.Background(), c.setup(t, a, b))
			if err == nil {
				t.Fatal("moved")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("error %v, want %v", err, c.is)
			}
			want := strings.ReplaceAll(c.want, a0, a)
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
			if movetest.ReadFile(t, old) != "older copy\n" {
				t.Fatal("the joining home's older copy was changed")
			}
			noTemp(t, filepath.Dir(old))
		})
	}
}

// a0 stands for the leaving home's path in an expected message.
const a0 = "\x00A"
