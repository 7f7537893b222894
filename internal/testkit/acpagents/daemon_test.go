package acpagents_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/acpagents"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// client names the tests' clients of the daemon.
const client = "acp-e2e"

// rig is one agent run through the real daemon: the agent's scripted
// model, its recipe as a config profile (protocol "acp") named acp-NAME,
// and the session's cwd.
type rig struct {
	a        *acpagents.Agent
	m        *acpagents.Model
	cwd      string
	provider string
	cfg      string
}

func newRig(t *testing.T, a *acpagents.Agent) *rig {
	r := &rig{a: a, m: a.NewModel(t), cwd: t.TempDir(), provider: "acp-" + a.Name}
	r.cfg = a.NewRecipe(t, r.m.URL, r.cwd).ProviderTable(r.provider)
	return r
}

// daemon starts sessiond with the rig's profile (stateDir "" fresh, a
// used one a restart).
func (r *rig) daemon(t *testing.T, stateDir string) *daemontest.Daemon {
	return providertest.Daemon(t, stateDir, r.cfg)
}

// stall scripts a reply that streams "slow" and holds until the test ends.
func (r *rig) stall(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	r.m.Push(acpagents.Stall(release))
}

// completed waits for turn's turn.completed and fails unless it is
// completed.
func completed(t *testing.T, s *providertest.Session, step, turn string) {
	t.Helper()
	done := s.Next(t, event.TurnCompleted)
	if tc := providertest.Decode[event.TurnCompletedData](t, done); done.TurnID != turn || tc.Status != event.StatusCompleted {
		t.Fatalf("%s: turn.completed %s %+v (want %s completed)", step, done.TurnID, tc, turn)
	}
}

// interrupted waits for turn's turn.completed and fails unless it is
// interrupted with reason.
func interrupted(t *testing.T, s *providertest.Session, step, turn, reason string) {
	t.Helper()
	done := s.Next(t, event.TurnCompleted)
	if tc := providertest.Decode[event.TurnCompletedData](t, done); done.TurnID != turn || tc.Status != event.StatusInterrupted || tc.Reason != reason {
		t.Fatalf("%s: turn.completed %s %+v (want %s interrupted %s)", step, done.TurnID, tc, turn, reason)
	}
}

// approval waits for approval.requested, a command the user can approve
// or deny.
func approval(t *testing.T, s *providertest.Session, step string) event.ApprovalRequestedData {
	t.Helper()
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	if req.Kind != "command" || !slices.Contains(req.Options, "approve") || !slices.Contains(req.Options, "deny") {
		t.Fatalf("%s: approval.requested %+v", step, req)
	}
	return req
}

func absent(t *testing.T, step, path string) {
	t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("%s: the command ran (%s: %v)", step, path, err)
	}
}

// lifecycle is the scenario every agent that works offline passes through
// the real daemon, in one session (each agent start costs seconds):
// streamed text; a command approved ran (its file exists); one denied did
// not; cancel mid-stream ends the turn interrupted user_cancel; cancel
// while a permission is pending answers it cancel and the command never
// runs; a daemon restart and a re-hold load the same ACP session
// (session/load) and the next model request carries the first turn;
// SIGKILL of the agent mid-turn ends it interrupted provider_exited; and
// nothing of the session's processes is left.
func lifecycle(t *testing.T, a *acpagents.Agent) {
	r := newRig(t, a)
	d := r.daemon(t, "")
	s := providertest.NewSession(t, d, client, r.provider, r.cwd)
	thread := s.Hold.ThreadID
	if thread == "" {
		t.Fatal("hold: no thread id (the ACP sessionId)")
	}

	r.m.Push(acpagents.Say("hel", "lo"))
	turn := s.Send(t, "remember the word pineapple-42")
	completed(t, s, "text", turn)
	if deltas, whole := s.Message(t, turn); deltas != "hello" || whole != "hello" {
		t.Fatalf("text: deltas %q, message.completed %q", deltas, whole)
	}

	ran := filepath.Join(r.cwd, "approved")
	r.m.Push(acpagents.Shell("touch "+ran), acpagents.Say("done"))
	turn = s.Send(t, "run it")
	s.Respond(t, approval(t, s, "approve").RequestID, "approve")
	completed(t, s, "approve", turn)
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("approve: the command did not run: %v", err)
	}

	denied := filepath.Join(r.cwd, "denied")
	r.m.Push(acpagents.Shell("touch " + denied))
	turn = s.Send(t, "run this one")
	s.Respond(t, approval(t, s, "deny").RequestID, "deny")
	done := s.Next(t, event.TurnCompleted)
	if tc := providertest.Decode[event.TurnCompletedData](t, done); done.TurnID != turn ||
		(tc.Status != event.StatusCompleted && tc.Reason != "approval_denied") {
		t.Fatalf("deny: turn.completed %+v", tc)
	} else {
		t.Logf("deny: turn.completed %s %s (stopReason %q)", tc.Status, tc.Reason, tc.StopReason)
	}
	absent(t, "deny", denied)

	r.stall(t)
	turn = s.Send(t, "think slowly")
	s.Next(t, event.MessageDelta)
	s.Cancel(t)
	interrupted(t, s, "cancel mid-stream", turn, event.ReasonUserCancel)

	never := filepath.Join(r.cwd, "never")
	r.m.Push(acpagents.Shell("touch " + never))
	turn = s.Send(t, "run the last one")
	req := approval(t, s, "cancel at approval")
	s.Cancel(t)
	if res := providertest.Decode[event.ApprovalResolvedData](t, s.Next(t, event.ApprovalResolved)); res.RequestID != req.RequestID || res.Decision != "cancel" {
		t.Fatalf("cancel at approval: approval.resolved %+v", res)
	}
	interrupted(t, s, "cancel at approval", turn, event.ReasonUserCancel)
	absent(t, "cancel at approval", never)

	journaled := s.ReadAll(t)
	d.Stop()
	providertest.NoProcesses(t, d)
	d2 := r.daemon(t, d.StateDir)
	s2 := providertest.ReopenResumed(t, d2, client, s.ID, thread)
	if a, b := countOf(journaled, event.MessageDelta), countOf(s2.ReadAll(t), event.MessageDelta); a != b {
		t.Fatalf("after restart: %d message.delta journaled before, %d after the load (its replay journaled again)", a, b)
	}
	before := len(r.m.Requests())
	r.m.Push(acpagents.Say("apple"))
	turn = s2.Send(t, "which word?")
	completed(t, s2, "after restart", turn)
	rs := r.m.Requests()
	if len(rs) <= before || !strings.Contains(string(rs[len(rs)-1]), "pineapple-42") {
		t.Fatalf("after restart: the model's request does not carry the first turn (%d requests, %d before)", len(rs), before)
	}
	if strings.Contains(typesOf(s2.ReadAll(t)), event.ProviderThreadReplace) {
		t.Fatal("after restart: the thread was replaced")
	}

	r.stall(t)
	turn = s2.Send(t, "think slowly again")
	s2.Next(t, event.MessageDelta)
	killAgent(t, s2.Hold.PID)
	interrupted(t, s2, "SIGKILL", turn, event.ReasonProviderExited)
	s2.Next(t, event.LeaseReleased)
	providertest.NoProcesses(t, d2)
	providertest.NoAnomalies(t, d2, r.provider)
	d2.Stop()
	providertest.NoProcesses(t, d2)
	absent(t, "the end", denied)
	absent(t, "the end", never)
}

// killAgent SIGKILLs the agent's whole process group, pid its leader:
// some agents are a launcher and a child (Qwen Code's cli-entry.js runs
// cli.js), and a child outliving its launcher ends the turn itself
// (stopReason cancelled) before the daemon sees the exit.
func killAgent(t *testing.T, pid int) {
	t.Helper()
	pgid, err := syscall.Getpgid(pid)
	if err != nil || pgid != pid {
		t.Fatalf("agent %d: process group %d, %v (want its own)", pid, pgid, err)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// countOf is how many of evs are of type typ.
func countOf(evs []event.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// typesOf is the events' types, comma-separated.
func typesOf(evs []event.Event) string {
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	return strings.Join(types, ",")
}

// TestCopilotDaemon: Copilot CLI through the daemon (make test).
func TestCopilotDaemon(t *testing.T) { lifecycle(t, acpagents.Copilot) }
