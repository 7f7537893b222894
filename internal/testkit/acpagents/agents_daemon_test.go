//go:build agents

package acpagents_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/acpagents"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// TestQwenDaemon: Qwen Code through the daemon.
func TestQwenDaemon(t *testing.T) { lifecycle(t, acpagents.Qwen) }

// TestOpencodeDaemon: opencode through the daemon.
func TestOpencodeDaemon(t *testing.T) { lifecycle(t, acpagents.Opencode) }

// TestClaudeAgentACP551TurnAfterCancelEnds shows what the daemon does
// about agentclientprotocol/claude-agent-acp#551: after a cancelled turn,
// the agent answers the next session/prompt at once with end_turn and no
// text, and streams that prompt's reply during the prompt after it (turns
// off by one). Every turn still ends: the one after the cancel completes
// (empty), the next completes too and its message starts with the reply
// the model gave the one before, and the session closes with nothing left
// running.
func TestClaudeAgentACP551TurnAfterCancelEnds(t *testing.T) {
	r := newRig(t, acpagents.ClaudeACP)
	d := r.daemon(t, "")
	s := providertest.NewSession(t, d, client, r.provider, r.cwd)

	r.stall(t)
	turn := s.Send(t, "think slowly")
	s.Next(t, event.MessageDelta)
	s.Cancel(t)
	interrupted(t, s, "cancel", turn, event.ReasonUserCancel)

	r.m.Push(acpagents.Say("hello"), acpagents.Say("again"))
	after := s.Send(t, "say hello")
	completed(t, s, "the turn after the cancel", after)
	next := s.Send(t, "say it again")
	completed(t, s, "the turn after that", next)
	got1, _ := s.Message(t, after)
	got2, _ := s.Message(t, next)
	t.Logf("after the cancel: %q, then %q", got1, got2)
	if got1 != "" || !strings.HasPrefix(got2, "hello") {
		t.Fatalf("turns after a cancel said %q then %q: not the off-by-one of claude-agent-acp#551 (fixed upstream? update this test and docs/agents.md)", got1, got2)
	}
	s.Close(t)
	d.Stop()
	providertest.NoProcesses(t, d)
}

// TestGeminiSameMinuteLoadReplacesThread shows what the daemon does about
// Gemini CLI 0.61's session/load in the same wall-clock minute as the
// session's creation (its session file is named by the minute; the load
// re-opens it, resets it and fails "No previous sessions found"): the
// re-hold after a daemon restart falls back to a fresh ACP session and
// journals provider.thread_replaced naming the old and the new one, and
// the next turn completes on it. When the clock crossed a minute between
// creation and load the load may work instead; the test then accepts a
// load that keeps the thread, with the first turn in the next request.
func TestGeminiSameMinuteLoadReplacesThread(t *testing.T) {
	if now := time.Now(); now.Second() > 40 {
		// the scenario needs the creation and the load in one minute:
		// start at the top of the next one (a clock precondition, not a
		// synchronisation)
		time.Sleep(time.Until(now.Truncate(time.Minute).Add(time.Minute)))
	}
	r := newRig(t, acpagents.Gemini)
	t0 := time.Now()
	d := r.daemon(t, "")
	s := providertest.NewSession(t, d, client, r.provider, r.cwd)
	old := s.Hold.ThreadID
	r.m.Push(acpagents.Say("noted"))
	completed(t, s, "first turn", s.Send(t, "remember the word pineapple-42"))
	d.Stop()
	providertest.NoProcesses(t, d)

	d2 := r.daemon(t, d.StateDir)
	s2 := providertest.Reopen(t, d2, client, s.ID)
	sameMinute := t0.Truncate(time.Minute).Equal(time.Now().Truncate(time.Minute))
	replaced := strings.Contains(typesOf(s2.ReadAll(t)), event.ProviderThreadReplace)
	t.Logf("same minute %v, thread replaced %v", sameMinute, replaced)
	switch {
	case replaced:
		rep := providertest.Decode[event.ThreadReplacedData](t, providertest.LastOf(t, s2.ReadAll(t), event.ProviderThreadReplace))
		if rep.OldThreadID != old || rep.NewThreadID == "" || rep.NewThreadID == old || rep.NewThreadID != s2.Hold.ThreadID {
			t.Fatalf("thread_replaced %+v (old %s, hold %s)", rep, old, s2.Hold.ThreadID)
		}
		completed(t, s2, "turn on the fresh session", s2.Send(t, "which word?"))
	case sameMinute:
		t.Fatalf("a load in the same minute kept thread %s (fixed upstream? update this test and docs/agents.md)", s2.Hold.ThreadID)
	default:
		if s2.Hold.ThreadID != old {
			t.Fatalf("re-hold thread %s, want %s", s2.Hold.ThreadID, old)
		}
		r.m.Push(acpagents.Say("apple"))
		completed(t, s2, "turn on the loaded session", s2.Send(t, "which word?"))
		if rs := r.m.Requests(); !strings.Contains(string(rs[len(rs)-1]), "pineapple-42") {
			t.Fatal("the loaded session's request does not carry the first turn")
		}
	}
	s2.Close(t)
	d2.Stop()
	providertest.NoProcesses(t, d2)
}
