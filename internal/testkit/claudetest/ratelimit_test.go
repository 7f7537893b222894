package claudetest_test

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// The model answers 429 rate_limit_error: the real CLI retries it
// (CLAUDE_CODE_MAX_RETRIES, 10 by default over ~3 min; 1 here), each retry
// a provider.notice {retrying}, then ends the turn failed {rate_limited}
// (its result: is_error, api_error_status 429, no reset time). The
// session takes the next turn.
func TestClaudeRateLimited(t *testing.T) {
	limited := claudetest.Reply{Status: 429, ErrorMessage: "This request would exceed your account's rate limit. Please try again later."}
	m := claudetest.NewModel(t, limited, limited, claudetest.Text("fine"))
	env := claudetest.NewEnv(t, m.URL)
	env["CLAUDE_CODE_MAX_RETRIES"] = "1"
	d := providertest.Daemon(t, "", providerConfig(t, "claude", env))
	s := providertest.NewSession(t, d, client, "claude", t.TempDir())
	turn := s.Send(t, "hello")
	got := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if got.Status != event.StatusFailed || got.Reason != event.ReasonRateLimited || got.ResetsAt != "" ||
		!strings.Contains(got.Error, "429") {
		t.Fatalf("turn.completed %+v", got)
	}
	retries := 0
	for _, ev := range s.Events() {
		if ev.Type == event.ProviderNotice && ev.TurnID == turn && providertest.Decode[event.NoticeData](t, ev).Code == "retrying" {
			retries++
		}
	}
	if retries != 1 || len(m.Requests()) != 2 {
		t.Fatalf("%d retry notices, %d model requests", retries, len(m.Requests()))
	}
	s.Send(t, "again")
	if got := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); got.Status != event.StatusCompleted {
		t.Fatalf("next turn %+v", got)
	}
	providertest.NoAnomalies(t, d, "claude")
}
