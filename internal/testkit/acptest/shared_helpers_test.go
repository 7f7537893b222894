package acptest_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// The tests below run the pinned codex-acp with processes = "account":
// every session of the profile is an ACP session of one codex-acp process
// (one runtime). Their sessions run turns at once, so the model answers
// by what each request asks (sharedModel), not in script order. (The
// helpers are codextest's shared tests', for the same model server.)

// sharedACP is codexACP with processes = "account".
func sharedACP(t *testing.T, name string, m *codextest.Model) string {
	return codexACP(t, name, m) + "processes = \"account\"\n"
}

// prompt is what a test's session sends: "PROMPT <kind> tag-<i>".
var promptRE = regexp.MustCompile(`PROMPT (\w+) (tag-\d+)`)

// lastPrompt is the kind and tag of the last prompt in a request's input
// (a thread's request carries its whole history), and whether a
// function call's output follows it (the request after an approved
// command).
func lastPrompt(r codextest.Request) (kind, tag string, afterCall bool) {
	in := r.Input()
	all := promptRE.FindAllStringSubmatchIndex(in, -1)
	if len(all) == 0 {
		return "", "", false
	}
	m := all[len(all)-1]
	return in[m[2]:m[3]], in[m[4]:m[5]], strings.Contains(in[m[1]:], "function_call_output")
}

// sharedModel answers "say" with "reply-<tag>" in three deltas, held
// until gate (if any) is closed; "run" with a command asking approval,
// then "ran-<tag>"; anything else with "ok-<tag>".
func sharedModel(t *testing.T, gate func(kind string) chan struct{}) *codextest.Model {
	m := codextest.NewModel(t)
	m.Route(func(r codextest.Request) (codextest.Reply, bool) {
		kind, tag, afterCall := lastPrompt(r)
		if tag == "" {
			return codextest.Reply{}, false
		}
		switch {
		case kind == "run" && afterCall:
			return codextest.Text("ran-", tag), true
		case kind == "run":
			return codextest.Exec("call_"+tag, "echo hi-"+tag), true
		case kind == "spawn" && afterCall:
			return codextest.Text("spawned-", tag), true
		case kind == "spawn": // a command leaving a process codex does not stop
			return codextest.Exec("call_"+tag, "setsid -f sleep "+leftover(tag)+" >/dev/null 2>&1 </dev/null; echo started"), true
		}
		rep := codextest.Text(kind+"-", "reply-", tag)
		if gate != nil {
			rep.Stall = gate(kind)
		}
		return rep, true
	})
	return m
}

// leftover is the sleep duration naming tag's leftover command
// ("60000" + the tag's number).
func leftover(tag string) string { return "60000" + strings.TrimPrefix(tag, "tag-") }

// leftoverPID finds the running "sleep <leftover(tag)>" among the
// daemon's tagged processes (0: none).
func leftoverPID(d *daemontest.Daemon, tag string) int {
	for _, p := range daemontest.TaggedProcesses(d.StateID) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); err == nil && string(b) == "sleep\x00"+leftover(tag)+"\x00" && providertest.Alive(p) {
			return p
		}
	}
	return 0
}

// send starts a turn "PROMPT kind tag-i" on s.
func send(t *testing.T, s *providertest.Session, kind string, i int) string {
	t.Helper()
	return s.Send(t, fmt.Sprintf("PROMPT %s tag-%d", kind, i))
}

// turnDone waits for turn's turn.completed on s.
func turnDone(t *testing.T, s *providertest.Session, turn string) event.TurnCompletedData {
	t.Helper()
	for {
		ev := s.Next(t, event.TurnCompleted)
		if ev.TurnID == turn {
			return providertest.Decode[event.TurnCompletedData](t, ev)
		}
	}
}

// texts are the message.delta texts of a journal, joined per turn.
func texts(t *testing.T, evs []event.Event) map[string]string {
	out := map[string]string{}
	for _, ev := range evs {
		if ev.Type == event.MessageDelta {
			out[ev.TurnID] += providertest.Decode[event.DeltaData](t, ev).Text
		}
	}
	return out
}

// onlyOwnTags fails unless every message text in s's journal names tag
// alone (no other session's reply reached it).
func onlyOwnTags(t *testing.T, s *providertest.Session, tag string) {
	t.Helper()
	for turn, text := range texts(t, s.ReadAll(t)) {
		for _, other := range regexp.MustCompile(`tag-\d+`).FindAllString(text, -1) {
			if other != tag {
				t.Errorf("session %s (%s): turn %s's text %q names %s", s.ID, tag, turn, text, other)
			}
		}
	}
}

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

// oneRuntime fails unless every session is on one runtime (one id, one
// pid) and returns them.
func oneRuntime(t *testing.T, ss []*providertest.Session) (string, int) {
	t.Helper()
	rt, pid := runtimeOf(t, ss[0])
	for i, s := range ss {
		r, p := runtimeOf(t, s)
		if !strings.HasPrefix(r, "r_") || r != rt || p != pid || s.Hold.PID != pid {
			t.Fatalf("session %d: runtime %q pid %d (hold pid %d); session 0: %q pid %d", i, r, p, s.Hold.PID, rt, pid)
		}
	}
	return rt, pid
}

// waitGone waits until pid has exited. There is no signal for another
// process's exit, so this polls.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(providertest.WaitLong)
	for providertest.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// arrivals waits for n requests at the model.
func arrivals(t *testing.T, m *codextest.Model, n int) {
	t.Helper()
	for range n {
		providertest.WaitArrived(t, m.Arrived())
	}
}
