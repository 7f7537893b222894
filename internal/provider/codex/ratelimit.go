package codex

import (
	"encoding/json"
	"time"
)

// How codex 0.169 reports an account's usage or rate limit (measured
// against a model server answering 429):
//   - a 429 whose body is {"error":{"type":"usage_limit_reached",
//     "resets_at":…}} ends the turn at once (codex does not retry it, nor a
//     plain 429, whatever request_max_retries says): `error` {willRetry:
//     false, error:{message: "You've hit your usage limit. … try again at
//     7:24 AM.", codexErrorInfo: "usageLimitExceeded"}}, then turn/completed
//     {failed} with the same error;
//   - any other 429: codexErrorInfo {responseTooManyFailedAttempts:
//     {httpStatusCode: 429}}, "exceeded retry limit, last status: 429 …";
//   - the reset time is not in the error (only in its message, in codex's
//     local time zone): it is in the account/rateLimits/updated codex sends
//     before the error, parsed from the answer's x-codex-primary-* /
//     x-codex-secondary-* headers: {rateLimits:{primary|secondary:
//     {usedPercent, windowDurationMins, resetsAt (Unix seconds)},
//     rateLimitReachedType}}.

// limitInfos: codexErrorInfo values that mean the account is limited.
var limitInfos = map[string]bool{"usageLimitExceeded": true, "rateLimitExceeded": true}

// isLimitError reports whether a TurnError (turn.error, or an `error`
// notification's error) says the account hit a usage or rate limit.
func isLimitError(raw json.RawMessage) bool {
	var e struct {
		Info json.RawMessage `json:"codexErrorInfo"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &e) != nil || len(e.Info) == 0 {
		return false
	}
	var s string
	if json.Unmarshal(e.Info, &s) == nil {
		return limitInfos[s]
	}
	var o map[string]struct {
		HTTPStatusCode *int `json:"httpStatusCode"`
	}
	if json.Unmarshal(e.Info, &o) != nil {
		return false
	}
	for _, v := range o { // e.g. responseTooManyFailedAttempts {httpStatusCode: 429}
		if v.HTTPStatusCode != nil && *v.HTTPStatusCode == 429 {
			return true
		}
	}
	return false
}

type limitWindow struct {
	UsedPercent float64 `json:"usedPercent"`
	ResetsAt    *int64  `json:"resetsAt"`
}

// onRateLimits keeps when the account's reached limit lifts, from the
// latest snapshot: the latest resetsAt of a window used up (≥ 100%), or,
// when codex says a limit was reached (rateLimitReachedType) without a
// full window, the latest resetsAt of any window. Zero: not limited, or
// no time given. The snapshot is process-wide: every thread of a runtime
// keeps it.
func (a *Adapter) onRateLimits(p json.RawMessage) {
	var n struct {
		RateLimits struct {
			Primary     *limitWindow    `json:"primary"`
			Secondary   *limitWindow    `json:"secondary"`
			ReachedType json.RawMessage `json:"rateLimitReachedType"`
		} `json:"rateLimits"`
	}
	if !a.params("account/rateLimits/updated", p, &n) {
		return
	}
	rl := n.RateLimits
	reached := len(rl.ReachedType) > 0 && string(rl.ReachedType) != "null"
	var full, any int64
	for _, w := range []*limitWindow{rl.Primary, rl.Secondary} {
		if w == nil || w.ResetsAt == nil {
			continue
		}
		any = max(any, *w.ResetsAt)
		if w.UsedPercent >= 100 {
			full = max(full, *w.ResetsAt)
		}
	}
	at := full
	if at == 0 && reached {
		at = any
	}
	a.mu.Lock()
	a.limitResets = at
	a.mu.Unlock()
}

// limitResetsAtLocked is when the account's limit lifts, RFC 3339, or ""
// when codex gave no time still to come.
func (a *Adapter) limitResetsAtLocked(now time.Time) string {
	if a.limitResets == 0 {
		return ""
	}
	t := time.Unix(a.limitResets, 0).UTC()
	if !t.After(now) {
		return ""
	}
	return t.Format(time.RFC3339)
}
