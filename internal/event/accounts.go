package event

import "strings"

// Event types of accounts (PROTOCOL.md "Accounts"; agent-session.accounts.v1).
const (
	// AccountSwitchQueued: a switch waits for the running turn's end
	// (AccountSwitchData: from, to).
	AccountSwitchQueued = "account.switch_queued"
	// AccountSwitched: the session now runs under another account
	// (AccountSwitchData: from, to, cause, continuity).
	AccountSwitched = "account.switched"
	// AccountSwitchFailed: a switch failed and the session kept its
	// account (AccountSwitchData: to, cause).
	AccountSwitchFailed = "account.switch_failed"
	// AccountExhausted: every failover account is rate-limited
	// (AccountExhaustedData).
	AccountExhausted = "account.exhausted"
)

// Causes of a switch, and continuities: how the thread moved.
const (
	SwitchCauseUser        = "user"
	SwitchCauseRateLimited = "rate_limited"
	ContinuityNative       = "native"   // the thread itself moved and was resumed by id
	ContinuityPortable     = "portable" // a fresh thread; its first turn carries the history
	ContinuityNone         = "none"     // nothing to carry: no thread yet
	// ReasonAccountSwitch is the session.ended reason of the teardown a
	// switch runs (the session starts again at once on its new account),
	// and provider.thread_replaced's cause of a portable switch.
	ReasonAccountSwitch = "account_switch"
	// ReasonThreadBusy is account.switch_queued's reason when the joining
	// account's runtime keeps a stale copy of the thread and serves other
	// sessions: the switch waits for that runtime's recycle.
	ReasonThreadBusy = "thread_busy"
	// ReasonRuntimeRecycle is the session.ended reason of a session taken
	// off a runtime being recycled (it starts again at once on a new one).
	ReasonRuntimeRecycle = "runtime_recycle"
)

// AccountSwitchData is the data of account.switch_queued, account.switched
// and account.switch_failed.
type AccountSwitchData struct {
	From       string `json:"from,omitempty"`
	To         string `json:"to"`
	Cause      string `json:"cause"`
	Continuity string `json:"continuity,omitempty"`
	// Reason, on account.switch_queued, says what the switch waits for
	// besides a running turn (ReasonThreadBusy).
	Reason string `json:"reason,omitempty"`
	// TurnID is the failed turn of a rate-limit switch; Retried says its
	// prompt was sent again (turn.started retryOf), else NoRetry says why not.
	TurnID  string `json:"turnId,omitempty"`
	Retried bool   `json:"retried,omitempty"`
	NoRetry string `json:"noRetry,omitempty"`
}

// AccountExhaustedData is the data of account.exhausted: the earliest
// time one of the profile's accounts is no longer limited (RFC 3339).
type AccountExhaustedData struct {
	Until  string `json:"until"`
	TurnID string `json:"turnId,omitempty"`
}

// AccountsV1 reports whether events of type typ are only for connections
// that negotiated agent-session.accounts.v1.
func AccountsV1(typ string) bool { return strings.HasPrefix(typ, "account.") }
