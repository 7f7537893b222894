package acp

import (
	"os"
	"os/exec"
	"path/filepath"
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
