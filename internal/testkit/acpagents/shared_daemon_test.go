package acpagents_test

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/acpagents"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// runtimeOf is the session's runtime id and pid as agentSession.get
// reports them.
func runtimeOf(t *testing.T, s *providertest.Session) (string, int) {
	t.Helper()
	var info api.SessionInfo
	if err := s.C.Call(providertest.Ctx(t), "agentSession.get", api.SessionParams{SessionID: s.ID}, &info); err != nil {
		t.Fatal(err)
	}
	return info.RuntimeID, info.PID
}

// shared is what an agent does with processes = "account" (docs/agents.md
// records it): two sessions are two ACP sessions of one agent process
// (one runtime id, one pid); the second's turn streams and completes
// while the first's is held at the model (the agent runs two prompts of
// two sessions at once), each reply only in its own journal; the held one
// then completes; closing one leaves the process to the other, which
// runs a turn on it; nothing is left.
func shared(t *testing.T, a *acpagents.Agent) {
	r := newRig(t, a)
	r.cfg += "processes = \"account\"\n"
	d := r.daemon(t, "")
	ss := []*providertest.Session{providertest.NewSession(t, d, client, r.provider, r.cwd),
		providertest.NewSession(t, d, client, r.provider, t.TempDir())}
	rt, pid := runtimeOf(t, ss[0])
	if rt2, pid2 := runtimeOf(t, ss[1]); !strings.HasPrefix(rt, "r_") || rt2 != rt || pid2 != pid {
		t.Fatalf("two sessions: runtimes %s/%s pids %d/%d", rt, rt2, pid, pid2)
	}
	if ss[0].Hold.ThreadID == ss[1].Hold.ThreadID {
		t.Fatalf("two sessions share the ACP session %s", ss[0].Hold.ThreadID)
	}

	release := make(chan struct{})
	r.m.Push(acpagents.Stall(release), acpagents.Say("sec", "ond"))
	held := ss[0].Send(t, "first")
	providertest.WaitArrived(t, r.m.Arrived)
	ss[0].Next(t, event.MessageDelta)
	turn := ss[1].Send(t, "second")
	completed(t, ss[1], "the second session while the first is held", turn)
	if text, _ := ss[1].Message(t, turn); text != "second" {
		t.Fatalf("the second session's reply %q", text)
	}
	close(release)
	completed(t, ss[0], "the held turn", held)
	if text, _ := ss[0].Message(t, held); strings.Contains(text, "second") {
		t.Fatalf("the first session's reply %q holds the second's", text)
	}

	ss[1].Close(t)
	ss[1].Next(t, event.LeaseReleased)
	r.m.Push(acpagents.Say("again"))
	turn = ss[0].Send(t, "again")
	completed(t, ss[0], "after the other session closed", turn)
	if _, p := runtimeOf(t, ss[0]); p != pid {
		t.Fatalf("the first session moved to pid %d from %d", p, pid)
	}
	providertest.NoAnomalies(t, d, r.provider)
	ss[0].Close(t)
	d.Stop()
	providertest.NoProcesses(t, d)
}

// TestCopilotShared: Copilot CLI serving two sessions in one process.
func TestCopilotShared(t *testing.T) { shared(t, acpagents.Copilot) }
