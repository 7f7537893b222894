package acp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/testkit/acptest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// The pinned codex-acp, driven by the adapter directly: every line either
// side writes (initialize, session/new, a streamed turn, a permission
// round trip, a cancel, a load with its replay) is valid against the
// pinned SDK's schema, and the adapter logs no anomaly.
func TestCodexACPConformance(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	m := codextest.NewModel(t, codextest.Text("Hel", "lo"), codextest.Exec("call_1", "echo hi > "+marker), codextest.Text("done"))
	home := acptest.CodexHome(t, m.URL)
	run := func(thread string) *agent {
		cmd := exec.Command(acptest.CodexACP(t))
		cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "HOME="+t.TempDir())
		return startCmd(t, cmd, func(o *provider.Options, _ *Profile) { o.ThreadID = thread })
	}
	g := run("")
	res := g.start(t)
	evs := g.turn(t, "t_1", "say hello")
	if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusCompleted || answerOf(t, evs) != "Hello" {
		t.Fatalf("turn 1: %s %s", types(evs), evs[len(evs)-1].Data)
	}
	ap := g.waitApproval(t, "run it")
	if err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.TurnCompleted)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	if err := g.a.StartTurn(t.Context(), "t_3", "again"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.TurnCompleted)
	_ = g.cmd.Process.Kill()
	<-g.a.Done()

	g2 := run(res.ThreadID)
	if r := g2.start(t); !r.Resumed || r.ThreadID != res.ThreadID {
		t.Fatalf("load: %+v", r)
	}
	if n := len(g2.evs); n != 0 {
		t.Fatalf("the load's replay was emitted: %d events", n)
	}
	for _, l := range []string{g.log(), g2.log()} {
		if strings.Contains(l, "level=WARN") {
			t.Errorf("anomaly for codex-acp's ordinary traffic:\n%s", l)
		}
	}
}

// The pinned codex-acp as a shared runtime, driven directly: one process,
// one initialize, two sessions whose turns run at once (the model holds
// both requests until both arrived), each reply only in its own session's
// events, a permission round trip on one while the other is idle, and a
// session/load of one of them into a second process; every line either
// side writes is valid against the pinned SDK's schema and the runtime
// logs no anomaly.
func TestCodexACPSharedConformance(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	gate, arrived := make(chan struct{}), make(chan struct{}, 4)
	m := codextest.NewModel(t)
	prompt := regexp.MustCompile(`PROMPT (\w+) (tag-\d+)`)
	m.Route(func(r codextest.Request) (codextest.Reply, bool) {
		all := prompt.FindAllStringSubmatchIndex(r.Input(), -1)
		if len(all) == 0 {
			return codextest.Reply{}, false
		}
		in, last := r.Input(), all[len(all)-1]
		kind, tag := in[last[2]:last[3]], in[last[4]:last[5]]
		switch {
		case kind == "run" && strings.Contains(in[last[1]:], "function_call_output"):
			return codextest.Text("ran"), true
		case kind == "run":
			return codextest.Exec("call_1", "echo hi > "+marker), true
		}
		arrived <- struct{}{}
		rep := codextest.Text("reply-", tag)
		rep.Stall = gate
		return rep, true
	})
	home := acptest.CodexHome(t, m.URL)
	run := func() *sharedAgent {
		cmd := exec.Command(acptest.CodexACP(t))
		cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "HOME="+t.TempDir())
		return startRuntime(t, cmd)
	}
	s := run()
	gs := s.threads(t, 2)
	for i, g := range gs {
		if err := g.a.StartTurn(t.Context(), "t_1", fmt.Sprintf("PROMPT say tag-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	<-arrived
	<-arrived
	close(gate)
	for i, g := range gs {
		evs := g.until(t, event.TurnCompleted)
		if got, want := answerOf(t, evs), fmt.Sprintf("reply-tag-%d", i); got != want {
			t.Fatalf("session %d: %q, want %q; %s", i, got, want, types(evs))
		}
	}
	if err := gs[0].a.StartTurn(t.Context(), "t_2", "PROMPT run tag-0"); err != nil {
		t.Fatal(err)
	}
	ap := data[event.ApprovalRequestedData](t, last(gs[0].until(t, event.ApprovalRequested)))
	if err := gs[0].a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	gs[0].until(t, event.TurnCompleted)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	quiet(t, gs[1], "session 1 during session 0's permission")
	if n := len(s.g.sentMethod("initialize")); n != 1 {
		t.Fatalf("%d initialize on one process", n)
	}
	old := gs[1].a.ThreadID()
	s2 := run()
	g := s2.thread(t, old)
	if !g.a.rt.canLoad || g.a.ThreadID() != old {
		t.Fatalf("load of %s: %q", old, g.a.ThreadID())
	}
	quiet(t, g, "the load's replay")
	for _, l := range []string{s.g.log(), s2.g.log()} {
		if strings.Contains(l, "level=WARN") {
			t.Errorf("anomaly for codex-acp's ordinary traffic:\n%s", l)
		}
	}
}
