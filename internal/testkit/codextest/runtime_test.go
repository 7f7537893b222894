package codextest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// TestCodexSharedRuntime: the built-in codex profile's default,
// processes = "account": five sessions are threads of one codex
// app-server (one pid, one runtime id), a turn on each at once, each
// reply in its own journal only; closing one leaves the others' next
// turns working.
func TestCodexSharedRuntime(t *testing.T) {
	replies := []string{"alpha", "bravo", "charlie", "delta", "echo"}
	var scripted []codextest.Reply
	for _, r := range replies {
		scripted = append(scripted, codextest.Text(r+" ", "reply"))
	}
	m := codextest.NewModel(t, scripted...)
	d := providertest.Daemon(t, "", sharedProviderConfig(t, "codex", codextest.Home(t, m.URL, "")))
	ss := make([]*providertest.Session, len(replies))
	for i := range ss {
		ss[i] = providertest.NewSession(t, d, client, "codex", t.TempDir())
	}
	var rt string
	for i, s := range ss {
		var si api.SessionInfo
		if err := s.C.Call(providertest.Ctx(t), "agentSession.get", map[string]any{"sessionId": s.ID}, &si); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			rt = si.RuntimeID
		}
		if si.RuntimeID == "" || si.RuntimeID != rt || si.PID != ss[0].Hold.PID {
			t.Fatalf("session %d: runtime %q pid %d; session 0: %q pid %d", i, si.RuntimeID, si.PID, rt, ss[0].Hold.PID)
		}
	}
	turns := make([]string, len(ss))
	for i, s := range ss {
		turns[i] = s.Send(t, "say something")
	}
	var got []string
	for i, s := range ss {
		done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
		if done.Status != event.StatusCompleted {
			t.Fatalf("session %d: turn.completed %+v", i, done)
		}
		text, _ := s.Message(t, turns[i])
		word, ok := strings.CutSuffix(text, " reply")
		if !ok || !slices.Contains(replies, word) {
			t.Fatalf("session %d's reply %q is not one scripted reply (events %s)", i, text, s.Types())
		}
		got = append(got, word)
	}
	slices.Sort(got)
	if !slices.Equal(got, replies) {
		t.Fatalf("replies across the sessions %v, want each scripted reply once: one went to two journals", got)
	}
	ss[1].Close(t)
	last := ss[2].Send(t, "again")
	for {
		ev := ss[2].Next(t, event.TurnCompleted)
		if ev.TurnID == last {
			break
		}
	}
	providertest.NoAnomalies(t, d, "codex")
}
