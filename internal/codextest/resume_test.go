package codextest_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/codextest"
	"github.com/sessiond/sessiond/internal/event"
)

// (f) A daemon restart, then a re-hold: codex resumes the same thread, and
// the model sees the earlier turn in the next request's input.
func TestCodexResumeAfterRestart(t *testing.T) {
	m := codextest.NewModel(t, codextest.Text("noted"), codextest.Text("apple"))
	cfg := providerConfig(t, "codex", codextest.Home(t, m.URL, ""))
	d := daemonWith(t, "", cfg)
	s := newSession(t, d, "codex", t.TempDir())
	s.send(t, "remember the word pineapple-42")
	s.f.next(t, event.TurnCompleted)
	thread := s.hold.ThreadID
	d.Stop()

	d2 := daemonWith(t, d.StateDir, cfg)
	c, f := dial(t, d2)
	s2 := &session{d: d2, c: c, f: f, id: s.id}
	s2.attachAndHold(t)
	if s2.hold.ThreadID != thread {
		t.Fatalf("re-hold thread %s, want %s", s2.hold.ThreadID, thread)
	}
	started := decode[struct {
		Resumed bool `json:"resumed"`
	}](t, lastOf(t, readAll(t, s2), event.ProviderStarted))
	if !started.Resumed {
		t.Fatal("provider.started after the restart is not a resume")
	}
	s2.send(t, "which word?")
	s2.f.next(t, event.TurnCompleted)
	reqs := m.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Input(), "pineapple-42") {
		t.Fatalf("the model's second request does not carry the first turn: %d requests", len(reqs))
	}
	noAnomalies(t, d2)
}

// (g) The thread's rollout removed from CODEX_HOME: the re-hold starts a
// fresh thread and journals provider.thread_replaced.
func TestCodexRolloutRemoved(t *testing.T) {
	m := codextest.NewModel(t)
	home := codextest.Home(t, m.URL, "")
	d := daemonWith(t, "", providerConfig(t, "codex", home))
	s := newSession(t, d, "codex", t.TempDir())
	s.send(t, "hello")
	s.f.next(t, event.TurnCompleted)
	old := s.hold.ThreadID
	s.close(t)
	if n := len(rollouts(t, home, old)); n == 0 {
		t.Fatalf("no rollout of thread %s under %s", old, home)
	}
	if err := os.RemoveAll(filepath.Join(home, "sessions")); err != nil {
		t.Fatal(err)
	}
	s.attachAndHold(t)
	rep := decode[event.ThreadReplacedData](t, s.f.next(t, event.ProviderThreadReplace))
	if rep.OldThreadID != old || rep.NewThreadID == old || rep.NewThreadID != s.hold.ThreadID {
		t.Fatalf("thread_replaced %+v, hold thread %s", rep, s.hold.ThreadID)
	}
	s.send(t, "again")
	if tc := decode[event.TurnCompletedData](t, s.f.next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("turn on the fresh thread: %+v", tc)
	}
}

// (h) Two sessions pinned to two CODEX_HOMEs: each resumes under its own.
func TestCodexTwoHomes(t *testing.T) {
	m := codextest.NewModel(t)
	homeA, homeB := codextest.Home(t, m.URL, ""), codextest.Home(t, m.URL, "")
	d := daemonWith(t, "", providerConfig(t, "codex-a", homeA), providerConfig(t, "codex-b", homeB))
	a := newSession(t, d, "codex-a", t.TempDir())
	b := newSession(t, d, "codex-b", t.TempDir())
	for _, s := range []*session{a, b} {
		s.send(t, "hi")
		s.f.next(t, event.TurnCompleted)
		s.close(t)
	}
	threadA, threadB := a.hold.ThreadID, b.hold.ThreadID
	for _, s := range []*session{a, b} {
		want := s.hold.ThreadID
		s.attachAndHold(t)
		if s.hold.ThreadID != want {
			t.Fatalf("re-hold thread %s, want %s", s.hold.ThreadID, want)
		}
		if strings.Contains(readTypes(t, s), event.ProviderThreadReplace) {
			t.Fatalf("session %s replaced its thread", s.id)
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

// readAll reads the session's whole journal.
func readAll(t *testing.T, s *session) []event.Event {
	t.Helper()
	var r struct {
		Events []event.Event `json:"events"`
	}
	if err := s.c.Call(ctxT(t), "agentSession.read", map[string]any{"sessionId": s.id, "afterSeq": 0, "limit": 4096}, &r); err != nil {
		t.Fatal(err)
	}
	return r.Events
}

func readTypes(t *testing.T, s *session) string {
	var types []string
	for _, ev := range readAll(t, s) {
		types = append(types, ev.Type)
	}
	return strings.Join(types, ",")
}
