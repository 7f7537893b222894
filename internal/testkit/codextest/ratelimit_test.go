package codextest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// A plain 429 ends the turn failed {rate_limited} without a reset time;
// then the model answers 429 with the responses API's usage-limit body
// (usage_limit_reached, resets_at) and the x-codex-primary-* headers of a
// used-up window: the real codex ends the turn at once (one request, no
// retry), failed {rate_limited} with resetsAt from the headers (the
// account's last snapshot: a later failure of the same account would
// carry it too); a 500 stays provider_error. The session takes the next turn. Both process
// modes.
func TestCodexUsageLimit(t *testing.T) {
	for name, table := range processModes {
		t.Run(name, func(t *testing.T) {
			reset := time.Now().Add(90 * time.Minute).Truncate(time.Second).UTC()
			limited := codextest.UsageLimit(reset)
			limited.Header = map[string]string{"x-codex-primary-used-percent": "100",
				"x-codex-primary-window-minutes": "300", "x-codex-primary-reset-at": fmt.Sprint(reset.Unix())}
			plain := codextest.Reply{Status: 429, ErrorBody: `{"error":{"type":"rate_limit_exceeded","message":"Rate limit reached"}}`}
			m := codextest.NewModel(t, plain, limited, codextest.Reply{Status: 500}, codextest.Text("fine"))
			d := providertest.Daemon(t, "", table(t, "codex", codextest.Home(t, m.URL, "")))
			s := providertest.NewSession(t, d, client, "codex", t.TempDir())
			for i, want := range []event.TurnCompletedData{
				{Status: event.StatusFailed, Reason: event.ReasonRateLimited},
				{Status: event.StatusFailed, Reason: event.ReasonRateLimited, ResetsAt: reset.Format(time.RFC3339)},
				{Status: event.StatusFailed, Reason: event.ReasonProviderError},
				{Status: event.StatusCompleted},
			} {
				s.Send(t, fmt.Sprintf("turn %d", i))
				got := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
				if got.Status != want.Status || got.Reason != want.Reason || got.ResetsAt != want.ResetsAt {
					t.Fatalf("turn %d ended %+v, want %+v", i, got, want)
				}
				if i == 1 && !strings.Contains(got.Error, "usage limit") {
					t.Fatalf("turn 1 error %q", got.Error)
				}
			}
			if n := len(m.Requests()); n != 4 {
				t.Fatalf("%d model requests, want 4\n%s", n, m.Summary())
			}
			providertest.NoAnomalies(t, d, "codex")
		})
	}
}

// codex 0.169 does not retry a usage-limit 429 even with
// request_max_retries and stream_max_retries at 1: one request, and the
// turn is rate_limited.
func TestCodexUsageLimitNotRetried(t *testing.T) {
	m := codextest.NewModel(t, codextest.UsageLimit(time.Now().Add(time.Hour)), codextest.Text("fine"))
	d := providertest.Daemon(t, "", providerConfig(t, "codex", codextest.HomeRetrying(t, m.URL)))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	s.Send(t, "hello")
	if got := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted)); got.Reason != event.ReasonRateLimited {
		t.Fatalf("turn ended %+v", got)
	}
	if n := len(m.Requests()); n != 1 {
		t.Fatalf("%d model requests, want 1\n%s", n, m.Summary())
	}
}
