package codextest_test

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// Accounts through the real daemon with the real codex (issue 25,
// "Real-binary tests"): two CODEX_HOMEs whose model provider sends two
// API keys; the model server records each request's Authorization header
// and input. The profile's own env (home A) is the account "default",
// account "b" is home B.

// accountsConfig is the codex profile of table (a process mode) on homeA
// with account b on homeB; failover, when set, is the profile's list.
func accountsConfig(t *testing.T, table func(t *testing.T, name, home string) string, homeA, homeB string, failover bool) string {
	cfg := table(t, "codex", homeA)
	if failover {
		cfg += "failover = [\"default\", \"b\"]\n"
	}
	return cfg + providertest.AccountTable("codex", "b", map[string]string{"CODEX_HOME": homeB})
}

// lastRequest is the model's last request, failing unless it is the
// n-th and carries key's credential and every one of has in its input.
func lastRequest(t *testing.T, m *codextest.Model, n int, key string, has ...string) codextest.Request {
	t.Helper()
	reqs := m.Requests()
	if len(reqs) != n {
		t.Fatalf("%d model requests, want %d\n%s", len(reqs), n, m.Summary())
	}
	last := reqs[n-1]
	if last.Credential != "Bearer "+key {
		t.Fatalf("request %d carries %q, want key %s", n, last.Credential, key)
	}
	for _, s := range has {
		if !strings.Contains(last.Input(), s) {
			t.Fatalf("request %d's input lacks %q:\n%s", n, s, last.Input())
		}
	}
	return last
}

// A→B→A: each switch (idle, native) moves the thread; the next request
// carries the account's key and the whole history, the thread id is the
// same throughout, and account.switched says native. Both process modes.
func TestCodexAccountsSwitchBackAndForth(t *testing.T) {
	for name, table := range processModes {
		t.Run(name, func(t *testing.T) {
			m := codextest.NewModel(t, codextest.Text("noted"), codextest.Text("apple"), codextest.Text("both"))
			homeA, homeB := keyed(t, m, "key-A"), keyed(t, m, "key-B")
			d := providertest.Daemon(t, "", accountsConfig(t, table, homeA, homeB, false))
			s := providertest.NewSession(t, d, client, "codex", t.TempDir())
			thread := s.Hold.ThreadID
			s.Turn(t, "remember the word pineapple-42")
			lastRequest(t, m, 1, "key-A", "pineapple-42")

			if r := s.Switch(t, "b", ""); !r.Switched || r.Queued || r.Account != "b" {
				t.Fatalf("switch to b: %+v", r)
			}
			s.Switched(t, "default", "b", event.SwitchCauseUser, event.ContinuityNative)
			s.Turn(t, "which word, bravo?")
			lastRequest(t, m, 2, "key-B", "pineapple-42", "noted", "which word, bravo?")

			if r := s.Switch(t, "default", ""); !r.Switched || r.Account != "default" {
				t.Fatalf("switch back: %+v", r)
			}
			s.Switched(t, "b", "default", event.SwitchCauseUser, event.ContinuityNative)
			s.Turn(t, "and now?")
			lastRequest(t, m, 3, "key-A", "pineapple-42", "which word, bravo?", "apple", "and now?")
			if got := s.ThreadID(t); got != thread || thread == "" {
				t.Fatalf("thread %s after the switches, was %s", got, thread)
			}
			for _, ev := range s.ReadAll(t) {
				if ev.Type == event.ProviderThreadReplace || ev.Type == event.AccountSwitchFailed {
					t.Fatalf("%s %s in a native switch", ev.Type, ev.Data)
				}
			}
			providertest.NoAnomalies(t, d, "codex")
		})
	}
}

// A switch asked for while the model holds the turn's stream open is
// queued (account.switch_queued) and applied right after that turn's
// turn.completed (account.switched), which ran on A; the next turn runs
// on B with the history. Both process modes.
func TestCodexAccountsSwitchQueuedBehindStream(t *testing.T) {
	for name, table := range processModes {
		t.Run(name, func(t *testing.T) {
			stall := make(chan struct{})
			m := codextest.NewModel(t, codextest.Text("noted"), codextest.Reply{Stall: stall, Deltas: []string{"slow answer"}}, codextest.Text("on B"))
			homeA, homeB := keyed(t, m, "key-A"), keyed(t, m, "key-B")
			d := providertest.Daemon(t, "", accountsConfig(t, table, homeA, homeB, false))
			s := providertest.NewSession(t, d, client, "codex", t.TempDir())
			s.Turn(t, "remember the word pineapple-42")
			providertest.WaitArrived(t, m.Arrived())

			held := s.Send(t, "take your time")
			providertest.WaitArrived(t, m.Arrived()) // the stream is open, held
			if r := s.Switch(t, "b", ""); r.Switched || !r.Queued || r.Account != "b" {
				close(stall)
				t.Fatalf("switch during the turn: %+v", r)
			}
			q := providertest.Decode[event.AccountSwitchData](t, s.Next(t, event.AccountSwitchQueued))
			if q.From != "default" || q.To != "b" {
				t.Fatalf("account.switch_queued %+v", q)
			}
			close(stall)
			s.Switched(t, "default", "b", event.SwitchCauseUser, event.ContinuityNative)
			providertest.Order(t, s.ReadAll(t), event.TurnStarted+"@"+held, event.AccountSwitchQueued,
				event.TurnCompleted+"@"+held, event.AccountSwitched)
			lastRequest(t, m, 2, "key-A", "take your time")
			if _, text := s.Message(t, held); text != "slow answer" {
				t.Fatalf("held turn's message %q", text)
			}
			s.Turn(t, "and on B?")
			lastRequest(t, m, 3, "key-B", "pineapple-42", "take your time", "slow answer", "and on B?")
			providertest.NoAnomalies(t, d, "codex")
		})
	}
}
