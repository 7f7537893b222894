package codextest_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// (f) A daemon restart, then a re-hold: codex resumes the same thread, and
// the model sees the earlier turn in the next request's input.
// In both process modes.
func TestCodexResumeAfterRestart(t *testing.T) {
	for name, table := range processModes {
		t.Run(name, func(t *testing.T) { resumeAfterRestart(t, table) })
	}
}

// processModes: the config tables of the two process modes.
var processModes = map[string]func(t *testing.T, name, home string) string{
	"session": providerConfig, "account": sharedProviderConfig,
}

func resumeAfterRestart(t *testing.T, table func(t *testing.T, name, home string) string) {
	m := codextest.NewModel(t, codextest.Text("noted"), codextest.Text("apple"))
	cfg := table(t, "codex", codextest.Home(t, m.URL, ""))
	d := providertest.Daemon(t, "", cfg)
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	s.Send(t, "remember the word pineapple-42")
	s.Next(t, event.TurnCompleted)
	thread := s.Hold.ThreadID
	d.Stop()

	d2 := providertest.Daemon(t, d.StateDir, cfg)
	s2 := providertest.ReopenResumed(t, d2, client, s.ID, thread)
	s2.Send(t, "which word?")
	s2.Next(t, event.TurnCompleted)
	reqs := m.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Input(), "pineapple-42") {
		t.Fatalf("the model's second request does not carry the first turn: %d requests", len(reqs))
	}
	providertest.NoAnomalies(t, d2, "codex")
}

// (g) The thread's rollout removed from CODEX_HOME: the re-hold starts a
// fresh thread and journals provider.thread_replaced.
// In both process modes (a shared runtime still has the thread loaded:
// codex says "missing source rollout" instead of "no rollout found").
func TestCodexRolloutRemoved(t *testing.T) {
	for name, table := range processModes {
		t.Run(name, func(t *testing.T) { rolloutRemoved(t, table) })
	}
}

func rolloutRemoved(t *testing.T, table func(t *testing.T, name, home string) string) {
	m := codextest.NewModel(t)
	home := codextest.Home(t, m.URL, "")
	d := providertest.Daemon(t, "", table(t, "codex", home))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	s.Send(t, "hello")
	s.Next(t, event.TurnCompleted)
	old := s.Hold.ThreadID
	s.Close(t)
	if n := len(rollouts(t, home, old)); n == 0 {
		t.Fatalf("no rollout of thread %s under %s", old, home)
	}
	if err := os.RemoveAll(filepath.Join(home, "sessions")); err != nil {
		t.Fatal(err)
	}
	s.AttachAndHold(t)
	rep := providertest.Decode[event.ThreadReplacedData](t, s.Next(t, event.ProviderThreadReplace))
	if rep.OldThreadID != old || rep.NewThreadID == old || rep.NewThreadID != s.Hold.ThreadID {
		t.Fatalf("thread_replaced %+v, hold thread %s", rep, s.Hold.ThreadID)
	}
	s.Send(t, "again")
	if tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("turn on the fresh thread: %+v", tc)
	}
}

// (h) Two sessions pinned to two CODEX_HOMEs: each resumes under its own.
func TestCodexTwoHomes(t *testing.T) {
	m := codextest.NewModel(t)
	homeA, homeB := codextest.Home(t, m.URL, ""), codextest.Home(t, m.URL, "")
	d := providertest.Daemon(t, "", providerConfig(t, "codex-a", homeA), providerConfig(t, "codex-b", homeB))
	a := providertest.NewSession(t, d, client, "codex-a", t.TempDir())
	b := providertest.NewSession(t, d, client, "codex-b", t.TempDir())
	for _, s := range []*providertest.Session{a, b} {
		s.Send(t, "hi")
		s.Next(t, event.TurnCompleted)
		s.Close(t)
	}
	threadA, threadB := a.Hold.ThreadID, b.Hold.ThreadID
	for _, s := range []*providertest.Session{a, b} {
		want := s.Hold.ThreadID
		s.AttachAndHold(t)
		if s.Hold.ThreadID != want {
			t.Fatalf("re-hold thread %s, want %s", s.Hold.ThreadID, want)
		}
		if strings.Contains(readTypes(t, s), event.ProviderThreadReplace) {
			t.Fatalf("session %s replaced its thread", s.ID)
		}
	}
	if len(rollouts(t, homeA, threadA)) == 0 || len(rollouts(t, homeB, threadB)) == 0 ||
		len(rollouts(t, homeA, threadB)) != 0 || len(rollouts(t, homeB, threadA)) != 0 {
		t.Fatalf("rollouts not each under its own home: A has %v %v, B has %v %v",
			rollouts(t, homeA, threadA), rollouts(t, homeA, threadB), rollouts(t, homeB, threadB), rollouts(t, homeB, threadA))
	}
}

// rollouts lists the files under home/sessions naming thread.
func rollouts(t *testing.T, home, thread string) []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(home, "sessions"), func(p string, de fs.DirEntry, err error) error {
		if err == nil && !de.IsDir() && strings.Contains(de.Name(), thread) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func readTypes(t *testing.T, s *providertest.Session) string {
	var types []string
	for _, ev := range s.ReadAll(t) {
		types = append(types, ev.Type)
	}
	return strings.Join(types, ",")
}
