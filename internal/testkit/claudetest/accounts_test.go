package claudetest_test

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// Accounts through the real daemon with the real CLI (issue 25,
// "Real-binary tests"): the profile's env is config dir A with key A
// (account "default"), account b is config dir B with key B. A switch
// A→B carries the transcript and `--resume`s it on B: the next request
// carries key B and the earlier turns, the conversation id unchanged;
// back to A likewise, with B's turn.
func TestClaudeAccountsSwitch(t *testing.T) {
	m := claudetest.NewModel(t, claudetest.Text("noted"), claudetest.Text("apple"), claudetest.Text("both"))
	envA, envB := claudetest.NewEnv(t, m.URL), claudetest.NewEnv(t, m.URL)
	envA["ANTHROPIC_API_KEY"] = "key-A"
	cfg := providerConfig(t, "claude", envA) + providertest.AccountTable("claude", "b",
		map[string]string{"CLAUDE_CONFIG_DIR": envB["CLAUDE_CONFIG_DIR"], "ANTHROPIC_API_KEY": "key-B"})
	d := providertest.Daemon(t, "", cfg)
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	s.Turn(t, "remember the word pineapple-42")
	thread := s.ThreadID(t)
	request := func(n int, key string, has ...string) {
		t.Helper()
		reqs := m.Requests()
		if len(reqs) != n || reqs[n-1].Credential != key {
			t.Fatalf("%d requests (want %d), the last with %q (want %s)", len(reqs), n, reqs[len(reqs)-1].Credential, key)
		}
		for _, h := range has {
			if !strings.Contains(reqs[n-1].Messages(), h) {
				t.Fatalf("request %d lacks %q: %s", n, h, reqs[n-1].Messages())
			}
		}
	}
	request(1, "key-A", "pineapple-42")

	if r := s.Switch(t, "b", ""); !r.Switched || r.Account != "b" {
		t.Fatalf("switch: %+v", r)
	}
	s.Switched(t, "default", "b", event.SwitchCauseUser, event.ContinuityNative)
	s.Turn(t, "which word, bravo?")
	request(2, "key-B", "pineapple-42", "noted", "which word, bravo?")

	if r := s.Switch(t, "default", ""); !r.Switched {
		t.Fatalf("switch back: %+v", r)
	}
	s.Switched(t, "b", "default", event.SwitchCauseUser, event.ContinuityNative)
	s.Turn(t, "and now?")
	request(3, "key-A", "pineapple-42", "which word, bravo?", "apple", "and now?")
	if got := s.ThreadID(t); got != thread {
		t.Fatalf("conversation %s after the switches, was %s", got, thread)
	}
	for _, ev := range s.ReadAll(t) {
		if ev.Type == event.ProviderThreadReplace || ev.Type == event.AccountSwitchFailed {
			t.Fatalf("%s %s in a native switch", ev.Type, ev.Data)
		}
	}
	providertest.NoAnomalies(t, d, "claude")
}

// A 429 rate_limit_error on A (retried once by the CLI) ends the turn
// failed {rate_limited}; the session fails over to b (cause rate_limited,
// the transcript carried) and sends the same prompt once more (retryOf),
// which completes on B with key B and the earlier turn; A is limited
// (15 min: the CLI gives no reset time), b not.
func TestClaudeAccountsFailover(t *testing.T) {
	limited := claudetest.Reply{Status: 429, ErrorMessage: "This request would exceed your account's rate limit. Please try again later."}
	m := claudetest.NewModel(t, claudetest.Text("noted"), limited, limited, claudetest.Text("done on B"))
	envA, envB := claudetest.NewEnv(t, m.URL), claudetest.NewEnv(t, m.URL)
	envA["ANTHROPIC_API_KEY"], envA["CLAUDE_CODE_MAX_RETRIES"] = "key-A", "1"
	cfg := providerConfig(t, "claude", envA) + "failover = [\"default\", \"b\"]\n" + providertest.AccountTable("claude", "b",
		map[string]string{"CLAUDE_CONFIG_DIR": envB["CLAUDE_CONFIG_DIR"], "ANTHROPIC_API_KEY": "key-B"})
	d := providertest.Daemon(t, "", cfg)
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	s.Turn(t, "remember the word pineapple-42")

	failed := s.Send(t, "summarise the plan")
	if tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); tc.Status != event.StatusFailed || tc.Reason != event.ReasonRateLimited {
		t.Fatalf("turn on A ended %+v", tc)
	}
	if sw := s.Switched(t, "default", "b", event.SwitchCauseRateLimited, event.ContinuityNative); sw.TurnID != failed || !sw.Retried {
		t.Fatalf("account.switched %+v", sw)
	}
	retry := providertest.Decode[event.TurnStartedData](t, s.Next(t, event.TurnStarted))
	if retry.RetryOf != failed || retry.Text != "summarise the plan" {
		t.Fatalf("retry turn.started %+v", retry)
	}
	if tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); tc.Status != event.StatusCompleted {
		t.Fatalf("retry ended %+v", tc)
	}
	reqs := m.Requests()
	last := reqs[len(reqs)-1]
	if len(reqs) != 4 || last.Credential != "key-B" || !strings.Contains(last.Messages(), "pineapple-42") ||
		!strings.Contains(last.Messages(), "summarise the plan") {
		t.Fatalf("%d requests; the last with %q: %s", len(reqs), last.Credential, last.Messages())
	}
	accts := s.Accounts(t, "claude")
	if a, b := accts["default"], accts["b"]; a.LimitedUntil == nil || b.LimitedUntil != nil {
		t.Fatalf("accounts default %+v, b %+v", a, b)
	}
	providertest.NoAnomalies(t, d, "claude")
}
