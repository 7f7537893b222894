package api

import "time"

// Attention kinds (daemon.attention's kind).
const (
	AttentionTurnCompleted     = "turn_completed"
	AttentionTurnFailed        = "turn_failed"
	AttentionApprovalRequested = "approval_requested"
)

// AttentionNotice is the params of the daemon.attention notification.
type AttentionNotice struct {
	SessionID string    `json:"sessionId"`
	Kind      string    `json:"kind"` // turn_completed | approval_requested | turn_failed
	Title     string    `json:"title"`
	At        time.Time `json:"at"`
}

// AttentionStatus is daemon.status's attention.
type AttentionStatus struct {
	KeepAwake KeepAwakeStatus `json:"keepAwake"`
	Notify    string          `json:"notify"` // none | desktop
}

// KeepAwakeStatus says whether the daemon can keep the machine awake
// (active: keep_awake is on and the inhibitor answered), whether it holds
// an inhibitor now (held: a turn runs), and why not when it cannot.
type KeepAwakeStatus struct {
	Active bool   `json:"active"`
	Held   bool   `json:"held"`
	Reason string `json:"reason,omitempty"`
}
