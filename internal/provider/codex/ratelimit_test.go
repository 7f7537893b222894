package codex

import (
	"fmt"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// The lines codex 0.169 wrote for a model answering 429 (measured; ids
// shortened): a usage limit with the x-codex-primary-* headers, the same
// without them, and a plain 429.
const (
	usageMsg     = "You’ve hit your usage limit. Visit https://chatgpt.com/settings/usage to purchase more credits or try again at 7:24 AM."
	usageErr     = `{"message":"` + usageMsg + `","codexErrorInfo":"usageLimitExceeded","additionalDetails":null,"misalignment":null}`
	plain429Err  = `{"message":"exceeded retry limit, last status: 429 Too Many Requests","codexErrorInfo":{"responseTooManyFailedAttempts":{"httpStatusCode":429}},"additionalDetails":null,"misalignment":null}`
	plain500Err  = `{"message":"exceeded retry limit, last status: 500 Internal Server Error","codexErrorInfo":{"responseTooManyFailedAttempts":{"httpStatusCode":500}},"additionalDetails":null,"misalignment":null}`
	rateLimitsAt = `{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","limitName":null,"primary":{"usedPercent":%s,"windowDurationMins":300,"resetsAt":%d},"secondary":null,"credits":null,"planType":null,"rateLimitReachedType":null}}}`
	rateLimitsNo = `{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","limitName":null,"primary":null,"secondary":null,"credits":null,"planType":null,"rateLimitReachedType":null}}}`
)

// A turn codex ends because the account hit a usage or rate limit ends
// failed {rate_limited}, with resetsAt when the rate-limit snapshot sent
// before the error had a used-up window; any other failure stays
// provider_error.
func TestRateLimitedTurn(t *testing.T) {
	reset := time.Now().Add(90 * time.Minute).Truncate(time.Second).UTC()
	cases := []struct {
		name     string
		limits   string // the account/rateLimits/updated before the error
		err      string
		inError  bool // the error only in the `error` notification, turn.error null
		reason   string
		resetsAt string
	}{
		{"usage limit with reset", sprintf(rateLimitsAt, "100", reset.Unix()), usageErr, false, event.ReasonRateLimited, reset.Format(time.RFC3339)},
		{"usage limit, error notification only", sprintf(rateLimitsAt, "100", reset.Unix()), usageErr, true, event.ReasonRateLimited, reset.Format(time.RFC3339)},
		{"usage limit without headers", rateLimitsNo, usageErr, false, event.ReasonRateLimited, ""},
		{"window not used up: no reset", sprintf(rateLimitsAt, "40", reset.Unix()), usageErr, false, event.ReasonRateLimited, ""},
		{"reset in the past", sprintf(rateLimitsAt, "100", time.Now().Add(-time.Minute).Unix()), usageErr, false, event.ReasonRateLimited, ""},
		{"plain 429", rateLimitsNo, plain429Err, false, event.ReasonRateLimited, ""},
		{"500", rateLimitsNo, plain500Err, false, event.ReasonProviderError, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, nil)
			f.handshake(t)
			f.startTurn(t, "t_1", "pt_1")
			f.send(t, c.limits)
			f.send(t, `{"method":"error","params":{"error":`+c.err+`,"willRetry":false,"threadId":"thr_1","turnId":"pt_1"}}`)
			turnErr := c.err
			if c.inError {
				turnErr = "null"
			}
			f.send(t, `{"method":"turn/completed","params":{"threadId":"thr_1","turn":{"id":"pt_1","status":"failed","error":`+turnErr+`}}}`)
			got := decode[event.TurnCompletedData](t, f.rec.waitFor(t, event.TurnCompleted, "t_1"))
			if got.Status != event.StatusFailed || got.Reason != c.reason || got.ResetsAt != c.resetsAt || got.Error == "" {
				t.Fatalf("turn.completed %+v, want failed {%s} resetsAt %q", got, c.reason, c.resetsAt)
			}
			if n := countOf(f.rec.all(), event.ProviderNotice); n != 0 {
				t.Fatalf("%d notices: %s", n, typesOf(f.rec.all()))
			}
		})
	}
}

var sprintf = fmt.Sprintf
