package codextest

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// The shared-runtime tests (codextest's, with codex app-server, and
// acptest's, with codex-acp) run many sessions of one profile on one
// runtime, turns at once, so the model answers by what each request asks
// (SharedModel), not in script order. Each session sends
// "PROMPT <kind> tag-<i>" (SendPrompt) and checks that only its own tag
// reached its journal (OnlyOwnTags).

// promptRE is what a test's session sends: "PROMPT <kind> tag-<i>".
var promptRE = regexp.MustCompile(`PROMPT (\w+) (tag-\d+)`)

// PromptsIn are the prompts in a request's input, oldest first, each as
// {whole, kind, tag}.
func PromptsIn(in string) [][]string { return promptRE.FindAllStringSubmatch(in, -1) }

// LastPrompt is the kind and tag of the last prompt in a request's input
// (a thread's request carries its whole history), and whether a
// function call's output follows it (the request after an approved
// command).
func LastPrompt(r Request) (kind, tag string, afterCall bool) {
	in := r.Input()
	all := promptRE.FindAllStringSubmatchIndex(in, -1)
	if len(all) == 0 {
		return "", "", false
	}
	m := all[len(all)-1]
	return in[m[2]:m[3]], in[m[4]:m[5]], strings.Contains(in[m[1]:], "function_call_output")
}

// SharedModel answers "say" with "reply-<tag>" in three deltas, held
// until gate (if any) is closed; "run" with a command asking approval,
// then "ran-<tag>"; "spawn" with a command leaving a process behind
// (Leftover), then "spawned-<tag>"; anything else with "<kind>-reply-<tag>".
func SharedModel(t testing.TB, gate func(kind string) chan struct{}) *Model {
	m := NewModel(t)
	m.Route(func(r Request) (Reply, bool) {
		kind, tag, afterCall := LastPrompt(r)
		if tag == "" {
			return Reply{}, false
		}
		switch {
		case kind == "run" && afterCall:
			return Text("ran-", tag), true
		case kind == "run":
			return Exec("call_"+tag, "echo hi-"+tag), true
		case kind == "spawn" && afterCall:
			return Text("spawned-", tag), true
		case kind == "spawn": // a command leaving a process codex does not stop
			return Exec("call_"+tag, "setsid -f sleep "+Leftover(tag)+" >/dev/null 2>&1 </dev/null; echo started"), true
		}
		rep := Text(kind+"-", "reply-", tag)
		if gate != nil {
			rep.Stall = gate(kind)
		}
		return rep, true
	})
	return m
}

// Leftover is the sleep duration naming tag's leftover command
// ("60000" + the tag's number).
func Leftover(tag string) string { return "60000" + strings.TrimPrefix(tag, "tag-") }

// LeftoverPID finds the running "sleep <Leftover(tag)>" among the
// daemon's tagged processes (0: none within providertest.WaitLong). The
// command's `setsid -f` forks and returns at once: the turn can end
// before the forked child has exec'd sleep, so this polls (there is no
// signal for another process's exec).
func LeftoverPID(d *daemontest.Daemon, tag string) int {
	for deadline := time.Now().Add(providertest.WaitLong); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, p := range daemontest.TaggedProcesses(d.StateID) {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); err == nil && string(b) == "sleep\x00"+Leftover(tag)+"\x00" && providertest.Alive(p) {
				return p
			}
		}
	}
	return 0
}

// SendPrompt starts a turn "PROMPT kind tag-i" on s.
func SendPrompt(t testing.TB, s *providertest.Session, kind string, i int) string {
	t.Helper()
	return s.Send(t, fmt.Sprintf("PROMPT %s tag-%d", kind, i))
}

// TurnDone waits for turn's turn.completed on s.
func TurnDone(t testing.TB, s *providertest.Session, turn string) event.TurnCompletedData {
	t.Helper()
	for {
		ev := s.Next(t, event.TurnCompleted)
		if ev.TurnID == turn {
			return providertest.Decode[event.TurnCompletedData](t, ev)
		}
	}
}

// deltaTexts are the message.delta texts of a journal, joined per turn.
func deltaTexts(t testing.TB, evs []event.Event) map[string]string {
	out := map[string]string{}
	for _, ev := range evs {
		if ev.Type == event.MessageDelta {
			out[ev.TurnID] += providertest.Decode[event.DeltaData](t, ev).Text
		}
	}
	return out
}

// OnlyOwnTags fails unless every message text in s's journal names tag
// alone (no other session's reply reached it).
func OnlyOwnTags(t testing.TB, s *providertest.Session, tag string) {
	t.Helper()
	for turn, text := range deltaTexts(t, s.ReadAll(t)) {
		for _, other := range regexp.MustCompile(`tag-\d+`).FindAllString(text, -1) {
			if other != tag {
				t.Errorf("session %s (%s): turn %s's text %q names %s", s.ID, tag, turn, text, other)
			}
		}
	}
}

// RuntimeOf is the session's runtime id and pid as agentSession.get
// reports them.
func RuntimeOf(t testing.TB, s *providertest.Session) (string, int) {
	t.Helper()
	var info api.SessionInfo
	if err := s.C.Call(providertest.Ctx(t), "agentSession.get", api.SessionParams{SessionID: s.ID}, &info); err != nil {
		t.Fatal(err)
	}
	return info.RuntimeID, info.PID
}

// OneRuntime fails unless every session is on one runtime (one id, one
// pid) and returns them.
func OneRuntime(t testing.TB, ss []*providertest.Session) (string, int) {
	t.Helper()
	rt, pid := RuntimeOf(t, ss[0])
	for i, s := range ss {
		r, p := RuntimeOf(t, s)
		if !strings.HasPrefix(r, "r_") || r != rt || p != pid || s.Hold.PID != pid {
			t.Fatalf("session %d: runtime %q pid %d (hold pid %d); session 0: %q pid %d", i, r, p, s.Hold.PID, rt, pid)
		}
	}
	return rt, pid
}

// WaitGone waits until pid has exited. There is no signal for another
// process's exit, so this polls.
func WaitGone(t testing.TB, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(providertest.WaitLong)
	for providertest.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Arrivals waits for n requests at the model.
func Arrivals(t testing.TB, m *Model, n int) {
	t.Helper()
	for range n {
		providertest.WaitArrived(t, m.Arrived())
	}
}
