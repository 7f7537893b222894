package claude

import (
	"fmt"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// The result Claude Code 2.1.328 ended a turn with after the model's 429
// rate_limit_error (measured; usage fields cut).
const limitedResultLine = `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"api_error_type":"rate_limit_error","terminal_reason":"api_error","result":"API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.","session_id":"sess-1","usage":{"input_tokens":0,"output_tokens":0}}`

// A result saying the API answered 429 / rate_limit_error ends the turn
// failed {rate_limited}, with resetsAt from a rejected rate_limit_event
// before it; other failures stay provider_error.
func TestRateLimitedResult(t *testing.T) {
	reset := time.Now().Add(2 * time.Hour).Truncate(time.Second).UTC()
	event429 := fmt.Sprintf(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":%d,"rateLimitType":"five_hour"},"session_id":"sess-1"}`, reset.Unix())
	allowed := `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"},"session_id":"sess-1"}`
	cases := []struct {
		name     string
		before   []string
		result   string
		reason   string
		resetsAt string
	}{
		{"429 without reset", nil, limitedResultLine, event.ReasonRateLimited, ""},
		{"429 after a rejected limit event", []string{event429}, limitedResultLine, event.ReasonRateLimited, reset.Format(time.RFC3339)},
		{"allowed again", []string{event429, allowed}, limitedResultLine, event.ReasonRateLimited, ""},
		{"type only", nil, `{"type":"result","subtype":"success","is_error":true,"api_error_type":"rate_limit_error","result":"x"}`, event.ReasonRateLimited, ""},
		{"api error 500", nil, `{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"api_error_type":"api_error","result":"API Error: 500"}`, event.ReasonProviderError, ""},
		{"status of another type", nil, `{"type":"result","subtype":"success","is_error":true,"api_error_status":"429?","result":"x"}`, event.ReasonProviderError, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, nil)
			f.started(t)
			for _, l := range c.before {
				f.send(t, l)
			}
			f.send(t, c.result)
			got := decodeData[event.TurnCompletedData](t, f.next(t, event.TurnCompleted))
			if got.Status != event.StatusFailed || got.Reason != c.reason || got.ResetsAt != c.resetsAt || got.Error == "" {
				t.Fatalf("turn.completed %+v, want failed {%s} resetsAt %q", got, c.reason, c.resetsAt)
			}
		})
	}
}
