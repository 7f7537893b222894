package codextest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/providertest"
)

// usageLimit is the model's usage-limit 429 with the headers of a
// used-up window resetting at reset.
func usageLimit(reset time.Time) codextest.Reply {
	r := codextest.UsageLimit(reset)
	r.Header = map[string]string{"x-codex-primary-used-percent": "100",
		"x-codex-primary-window-minutes": "300", "x-codex-primary-reset-at": fmt.Sprint(reset.Unix())}
	return r
}

// retriesOf are the turns of evs whose turn.started carries retryOf.
func retriesOf(t *testing.T, evs []event.Event) map[string]string {
	out := map[string]string{}
	for _, ev := range evs {
		if ev.Type == event.TurnStarted {
			if d := providertest.Decode[event.TurnStartedData](t, ev); d.RetryOf != "" {
				out[ev.TurnID] = d.RetryOf
			}
		}
	}
	return out
}

// A usage-limit answer on A ends the turn failed {rate_limited}; the
// session fails over to b (cause rate_limited, native) and sends the same
// prompt once more as a new turn (turn.started retryOf), which completes
// on B with B's key; listAccounts says A is limited until the window's
// reset, b not.
func TestCodexAccountsFailoverRetries(t *testing.T) {
	reset := time.Now().Add(90 * time.Minute).Truncate(time.Second).UTC()
	m := codextest.NewModel(t, codextest.Text("noted"), usageLimit(reset), codextest.Text("done on B"))
	homeA, homeB := keyed(t, m, "key-A"), keyed(t, m, "key-B")
	d := providertest.Daemon(t, "", accountsConfig(t, providerConfig, homeA, homeB, true))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())
	s.Turn(t, "remember the word pineapple-42")

	failed := s.Send(t, "summarise the plan")
	tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if tc.Status != event.StatusFailed || tc.Reason != event.ReasonRateLimited {
		t.Fatalf("turn on A ended %+v", tc)
	}
	sw := s.Switched(t, "default", "b", event.SwitchCauseRateLimited, event.ContinuityNative)
	if sw.TurnID != failed || !sw.Retried || sw.NoRetry != "" {
		t.Fatalf("account.switched %+v", sw)
	}
	retry := providertest.Decode[event.TurnStartedData](t, s.Next(t, event.TurnStarted))
	if retry.RetryOf != failed || retry.Text != "summarise the plan" || retry.TurnID == failed {
		t.Fatalf("retry turn.started %+v", retry)
	}
	done := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if done.Status != event.StatusCompleted {
		t.Fatalf("retry ended %+v", done)
	}
	lastRequest(t, m, 3, "key-B", "pineapple-42", "summarise the plan")
	if r := m.Requests()[1]; r.Credential != "Bearer key-A" {
		t.Fatalf("the limited request carried %q", r.Credential)
	}
	accts := s.Accounts(t, "codex")
	if a := accts["default"]; a.LimitedUntil == nil || *a.LimitedUntil != reset.Format(time.RFC3339) {
		t.Fatalf("account default %+v, want limited until %s", a, reset.Format(time.RFC3339))
	}
	if b := accts["b"]; b.LimitedUntil != nil || b.Sessions != 1 {
		t.Fatalf("account b %+v", b)
	}
	if got := retriesOf(t, s.ReadAll(t)); len(got) != 1 || got[retry.TurnID] != failed {
		t.Fatalf("retries %v", got)
	}
	providertest.NoAnomalies(t, d, "codex")
}

// A turn that ran a command (approved exec) before the usage limit is
// not sent again: the session switches to b (cause rate_limited), the
// turn stays failed, account.switched says why (noRetry), no turn carries
// retryOf, and the command ran once. The next turn runs on B.
func TestCodexAccountsFailoverAfterCommandNoRetry(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	reset := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	m := codextest.NewModel(t, codextest.Exec("call_1", "echo ran >> "+marker), usageLimit(reset), codextest.Text("next on B"))
	homeA, homeB := keyed(t, m, "key-A"), keyed(t, m, "key-B")
	d := providertest.Daemon(t, "", accountsConfig(t, providerConfig, homeA, homeB, true))
	s := providertest.NewSession(t, d, client, "codex", t.TempDir())

	failed := s.Send(t, "run it")
	req := providertest.Decode[event.ApprovalRequestedData](t, s.Next(t, event.ApprovalRequested))
	s.Respond(t, req.RequestID, "approve")
	tc := providertest.Decode[event.TurnCompletedData](t, s.Next(t, event.TurnCompleted))
	if tc.Status != event.StatusFailed || tc.Reason != event.ReasonRateLimited {
		t.Fatalf("turn on A ended %+v", tc)
	}
	sw := s.Switched(t, "default", "b", event.SwitchCauseRateLimited, event.ContinuityNative)
	if sw.TurnID != failed || sw.Retried || !strings.Contains(sw.NoRetry, "produced items") {
		t.Fatalf("account.switched %+v", sw)
	}
	// A retry would be sent under the session lock the switch holds, so
	// before this send's turn: the journal then has no turn between them.
	next := s.Turn(t, "what now?")
	lastRequest(t, m, 3, "key-B", "what now?")
	evs := s.ReadAll(t)
	if got := retriesOf(t, evs); len(got) != 0 {
		t.Fatalf("retries %v of a turn that ran a command", got)
	}
	var turns []string
	for _, ev := range evs {
		if ev.Type == event.TurnStarted {
			turns = append(turns, ev.TurnID)
		}
	}
	if len(turns) != 2 || turns[0] != failed || turns[1] != next {
		t.Fatalf("turns %v, want [%s %s]", turns, failed, next)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "ran\n" {
		t.Fatalf("the command's marker %q %v: it must have run once", b, err)
	}
	providertest.NoAnomalies(t, d, "codex")
}

// The thread's rollout removed from A before the switch: nothing to
// carry, so the switch falls back to portable (continuity portable,
// provider.thread_replaced {account_switch}, a new thread on B) and the
// next request carries the earlier turns (user text and answer) from the
// journal, with B's key. Both process modes.
func TestCodexAccountsPortableFallback(t *testing.T) {
	for name, table := range processModes {
		t.Run(name, func(t *testing.T) {
			m := codextest.NewModel(t, codextest.Text("noted, pineapple"), codextest.Text("apple"))
			homeA, homeB := keyed(t, m, "key-A"), keyed(t, m, "key-B")
			d := providertest.Daemon(t, "", accountsConfig(t, table, homeA, homeB, false))
			s := providertest.NewSession(t, d, client, "codex", t.TempDir())
			s.Turn(t, "remember the word pineapple-42")
			thread := s.ThreadID(t)
			files := rollouts(t, homeA, thread)
			if len(files) == 0 {
				t.Fatalf("no rollout of thread %s in %s", thread, homeA)
			}
			for _, f := range files {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
			if r := s.Switch(t, "b", ""); !r.Switched {
				t.Fatalf("switch: %+v", r)
			}
			s.Switched(t, "default", "b", event.SwitchCauseUser, event.ContinuityPortable)
			rep := providertest.Decode[event.ThreadReplacedData](t, providertest.LastOf(t, s.ReadAll(t), event.ProviderThreadReplace))
			if rep.Cause != event.ReasonAccountSwitch || rep.OldThreadID != thread || rep.NewThreadID == thread || rep.NewThreadID == "" {
				t.Fatalf("provider.thread_replaced %+v", rep)
			}
			s.Turn(t, "which word?")
			lastRequest(t, m, 2, "key-B", "pineapple-42", "noted, pineapple", "which word?")
			if got := s.ThreadID(t); got != rep.NewThreadID {
				t.Fatalf("thread %s, replaced by %s", got, rep.NewThreadID)
			}
			if len(rollouts(t, homeB, thread)) != 0 {
				t.Fatalf("home B has a copy of the old thread %s", thread)
			}
			providertest.NoAnomalies(t, d, "codex")
		})
	}
}
