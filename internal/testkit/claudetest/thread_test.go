package claudetest_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

var uuidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// countOf counts the events of type typ by seq (a client attached twice
// is sent the later events twice).
func countOf(evs []event.Event, typ string) int {
	seen := map[uint64]bool{}
	for _, ev := range evs {
		if ev.Type == typ {
			seen[ev.Seq] = true
		}
	}
	return len(seen)
}

// turnDone waits for turn id's turn.completed (a client attached twice is
// sent earlier turns' events again).
func turnDone(t *testing.T, s *providertest.Session, id string) {
	t.Helper()
	for s.Next(t, event.TurnCompleted).TurnID != id {
	}
}

// The hold of a fresh session returns its thread id before any turn: the
// daemon minted it and passed it as --session-id; provider.started and
// agentSession.get name it, and the first turn's system/init reports the
// same id (no replacement, no anomaly), under which the CLI writes the
// conversation.
func TestClaudeHoldHasThreadID(t *testing.T) {
	m := claudetest.NewModel(t)
	env := claudetest.NewEnv(t, m.URL)
	d := providertest.Daemon(t, "", providerConfig(t, "claude", env))
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	id := s.Hold.ThreadID
	if !uuidRe.MatchString(id) {
		t.Fatalf("hold before any turn: threadId %q, want a UUID", id)
	}
	if got := s.ThreadID(t); got != id {
		t.Fatalf("agentSession.get threadId %q, hold %q", got, id)
	}
	if ps := s.Next(t, event.ProviderStarted); !strings.Contains(string(ps.Data), `"threadId":"`+id+`"`) {
		t.Fatalf("provider.started %s, want threadId %s", ps.Data, id)
	}
	s.Send(t, "hello")
	s.Next(t, event.TurnCompleted)
	if got := s.ThreadID(t); got != id {
		t.Fatalf("thread after the first turn %q, want %s", got, id)
	}
	if len(conversations(t, env["CLAUDE_CONFIG_DIR"], id)) == 0 {
		t.Fatalf("no conversation %s under %s", id, env["CLAUDE_CONFIG_DIR"])
	}
	if n := countOf(s.Events(), event.ProviderThreadReplace); n != 0 {
		t.Fatalf("%d provider.thread_replaced: %s", n, s.Types())
	}
	providertest.NoAnomalies(t, d, "claude")
}

// A session held and closed before any turn: the CLI wrote no
// conversation, so the re-hold's --resume is "No conversation found"; the
// conversation starts afresh under the same minted id with nothing
// replaced (no provider.thread_replaced), the first turn runs under it,
// and after that the next hold resumes it.
func TestClaudeUnbegunThreadKeepsItsID(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Text("noted"), claudetest.Text("apple"))
	d := providertest.Daemon(t, "", providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)))
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	id := s.Hold.ThreadID
	if id == "" {
		t.Fatal("no thread id at the hold")
	}
	s.Close(t)
	s.AttachAndHold(t)
	if s.Hold.ThreadID != id {
		t.Fatalf("re-hold before any turn: thread %q, want %s", s.Hold.ThreadID, id)
	}
	turnDone(t, s, s.Send(t, "remember the word pineapple-42"))
	s.Close(t)
	s.AttachAndHold(t)
	if s.Hold.ThreadID != id {
		t.Fatalf("re-hold after the first turn: thread %q, want %s", s.Hold.ThreadID, id)
	}
	turnDone(t, s, s.Send(t, "which word?"))
	if reqs := m.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Messages(), "pineapple-42") {
		t.Fatalf("the second hold did not resume the first turn's conversation: %d requests", len(reqs))
	}
	journal := s.ReadAll(t)
	if n := countOf(journal, event.ProviderThreadReplace); n != 0 {
		t.Fatalf("%d provider.thread_replaced: %s", n, s.Types())
	}
	var started []string
	for _, ev := range journal {
		if ev.Type == event.ProviderStarted {
			started = append(started, string(ev.Data))
		}
	}
	if len(started) != 3 || !strings.Contains(started[1], `"resumed":false`) || !strings.Contains(started[2], `"resumed":true`) {
		t.Fatalf("provider.started: %q", started)
	}
}

// A resume under which the CLI reports another session id (a profile
// running it with --fork-session: the resumed conversation continues under
// a new id, its history carried): the first turn's system/init names the
// new id, provider.thread_replaced {old, new, cause} is journaled and the
// record takes the new id, which the next hold resumes.
func TestClaudeForkedResumeReplacesThread(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Text("noted"), claudetest.Text("apple"))
	cfg := strings.Replace(providerConfig(t, "claude", claudetest.NewEnv(t, m.URL)), `"stdio"]`, `"stdio", "--fork-session"]`, 1)
	if !strings.Contains(cfg, "--fork-session") {
		t.Fatalf("no --fork-session in %s", cfg)
	}
	d := providertest.Daemon(t, "", cfg)
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	s.Send(t, "remember the word pineapple-42")
	s.Next(t, event.TurnCompleted)
	old := s.Hold.ThreadID
	if got := s.ThreadID(t); old == "" || got != old {
		t.Fatalf("fresh thread: hold %q, record %q", old, got)
	}
	s.Close(t)

	s.AttachAndHold(t)
	if s.Hold.ThreadID != old {
		t.Fatalf("re-hold resumed %q, want %s", s.Hold.ThreadID, old)
	}
	s.Send(t, "which word?")
	rep := providertest.Decode[event.ThreadReplacedData](t, s.Next(t, event.ProviderThreadReplace))
	if rep.OldThreadID != old || !uuidRe.MatchString(rep.NewThreadID) || rep.NewThreadID == old || rep.Cause == "" {
		t.Fatalf("thread_replaced %+v (old %s)", rep, old)
	}
	s.Next(t, event.TurnCompleted)
	if got := s.ThreadID(t); got != rep.NewThreadID {
		t.Fatalf("record thread %q after the fork, want %s", got, rep.NewThreadID)
	}
	if reqs := m.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Messages(), "pineapple-42") {
		t.Fatalf("the forked conversation lost the first turn: %d requests", len(reqs))
	}
	s.Close(t)
	s.AttachAndHold(t)
	if s.Hold.ThreadID != rep.NewThreadID {
		t.Fatalf("the next hold resumed %q, want the new id %s", s.Hold.ThreadID, rep.NewThreadID)
	}
}
