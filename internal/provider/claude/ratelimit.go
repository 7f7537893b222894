package claude

import (
	"encoding/json"
	"net/http"
	"time"
)

// How Claude Code 2.1.328 reports a rate or usage limit (measured against
// a model server answering 429 {"type":"error","error":{"type":
// "rate_limit_error",…}}): it retries the 429 with backoff, up to 10 times
// by default (CLAUDE_CODE_MAX_RETRIES; each retry a system/api_retry
// {error_status: 429, error: "rate_limit"}; ~3 min in all), then ends the
// turn with an assistant message {error: "rate_limit", api_error_status:
// 429} and a `result` {subtype: "success", is_error: true,
// api_error_status: 429, api_error_type: "rate_limit_error", result: "API
// Error: Request rejected (429) · …"}. The result carries no reset time; a
// claude.ai subscription's limit comes with rate_limit_event
// {rate_limit_info: {status: "rejected", resetsAt (Unix seconds)}} (the
// SDK's SDKRateLimitEvent), which the adapter keeps for the turn's
// resetsAt.

// limitedResult reports whether a result says the account hit a rate or
// usage limit.
func limitedResult(r *result) bool {
	var status int
	var typ string
	_ = json.Unmarshal(r.APIErrorStatus, &status)
	_ = json.Unmarshal(r.APIErrorType, &typ)
	return r.IsError && (status == http.StatusTooManyRequests || typ == "rate_limit_error")
}

// onRateLimitEvent keeps when a rejected subscription limit lifts (0 once
// the CLI says the account is allowed again).
func (a *Adapter) onRateLimitEvent(line []byte) {
	var e struct {
		Info struct {
			Status   string `json:"status"`
			ResetsAt int64  `json:"resetsAt"`
		} `json:"rate_limit_info"`
	}
	if !a.decode("rate_limit_event", line, &e) {
		return
	}
	at := int64(0)
	if e.Info.Status == "rejected" {
		at = e.Info.ResetsAt
	}
	a.mu.Lock()
	a.limitResets = at
	a.mu.Unlock()
}

// limitResetsAt is when the limit lifts, RFC 3339, or "" when the CLI gave
// no time still to come.
func (a *Adapter) limitResetsAt(now time.Time) string {
	a.mu.Lock()
	at := a.limitResets
	a.mu.Unlock()
	if at == 0 || !time.Unix(at, 0).After(now) {
		return ""
	}
	return time.Unix(at, 0).UTC().Format(time.RFC3339)
}
