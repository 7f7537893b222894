// Package event defines the journal record shared by the journal, the
// provider adapters, the host and the wire: one Event per row, typed by a
// dotted name, with a per-session gapless seq assigned by the journal.
package event

import (
	"encoding/json"
	"time"
)

// Event types, as PROTOCOL.md lists them.
const (
	SessionCreated        = "session.created"
	LeaseAcquired         = "lease.acquired"
	ProviderStarted       = "provider.started"
	ProviderThreadReplace = "provider.thread_replaced"
	TurnStarted           = "turn.started"
	MessageDelta          = "message.delta"
	MessageCompleted      = "message.completed"
	ApprovalRequested     = "approval.requested"
	ApprovalResolved      = "approval.resolved"
	TurnCompleted         = "turn.completed"
	ProviderExited        = "provider.exited"
	SessionEnded          = "session.ended"
	LeaseReleased         = "lease.released"
	// ProviderDetached: a session's thread left its shared runtime, which
	// goes on (ProviderDetachedData; agent-session.runtimes.v1).
	ProviderDetached = "provider.detached"
	// JournalLoss records events a live session handed to the journal that
	// could not be stored (JournalLossData), in the place they would have had.
	JournalLoss = "journal.loss"
	// JournalCorrupt stands, when read, where a stored row no longer decodes
	// (the disk damaged it): seq stays gapless and the damage is visible
	// (JournalCorruptData). It is never written.
	JournalCorrupt = "journal.corrupt"
)

// Turn statuses carried by turn.completed.
const (
	StatusCompleted   = "completed"
	StatusInterrupted = "interrupted"
	StatusFailed      = "failed"
)

// Reasons carried by turn.completed and session.ended.
const (
	ReasonUserCancel     = "user_cancel"
	ReasonProviderExited = "provider_exited"
	ReasonProviderError  = "provider_error"
	ReasonClosed         = "closed"
	ReasonEvicted        = "evicted"
	ReasonDaemonRestart  = "daemon_restart"
	ReasonShutdown       = "shutdown"
	ReasonJournalLoss    = "journal_loss" // the turn's events could not all be stored
	// ReasonApprovalDenied: the provider ended the turn itself after the
	// user denied an approval (an ACP agent's stopReason "cancelled").
	ReasonApprovalDenied = "approval_denied"
	// ReasonRateLimited: the provider ended the turn because its account
	// hit a usage or rate limit (TurnCompletedData.ResetsAt: when the
	// provider says it lifts).
	ReasonRateLimited = "rate_limited"
)

// Event is one committed journal row.
type Event struct {
	SessionID string          `json:"sessionId"`
	Seq       uint64          `json:"seq"`
	At        time.Time       `json:"at"`
	Type      string          `json:"type"`
	TurnID    string          `json:"turnId,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`

	// Raw is the event's JSON as the journal stored it (AppendJSON's
	// shape), set on every event the journal hands out; the wire splices
	// it as is. It is never to be modified.
	Raw json.RawMessage `json:"-"`
}

// Draft is an event before the journal has given it a seq and a time.
type Draft struct {
	Type   string
	TurnID string
	Data   json.RawMessage
	// Delta, when set, is what Data holds for the coalescer (delta.go).
	Delta *DeltaParts
}

// New builds a Draft, marshalling data (nil means no data). Data types are
// plain structs and maps, so marshalling cannot fail; a failure panics as a
// programming error.
func New(typ, turnID string, data any) Draft {
	d := Draft{Type: typ, TurnID: turnID}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			panic("event: marshal " + typ + ": " + err.Error())
		}
		d.Data = b
	}
	return d
}

// Payloads of the event types whose shape others read back.

// TurnStartedData is the data of turn.started.
type TurnStartedData struct {
	TurnID          string `json:"turnId"`
	Text            string `json:"text"`
	ClientMessageID string `json:"clientMessageId,omitempty"`
	// Origin is who sent the turn (absent on turns journaled before it existed).
	Origin *Origin `json:"origin,omitempty"`
	// RetryOf is the rate-limited turn whose prompt this one sends again
	// on another account (failover).
	RetryOf string `json:"retryOf,omitempty"`
}

// Origin names the connection an input came on (PROTOCOL.md "Attention"):
// initialize's client.name, the connection id, and client.device when the
// client sent one (the relay sends the phone's identity).
type Origin struct {
	Client       string `json:"client"`
	ConnectionID string `json:"connectionId"`
	Device       string `json:"device,omitempty"`
}

// TurnCompletedData is the data of turn.completed.
type TurnCompletedData struct {
	Status         string `json:"status"`
	Reason         string `json:"reason,omitempty"`
	ProviderTurnID string `json:"providerTurnId,omitempty"`
	Error          string `json:"error,omitempty"`
	// StopReason is an ACP agent's stopReason, as sent.
	StopReason string `json:"stopReason,omitempty"`
	// ResetsAt (RFC 3339), with Reason rate_limited, is when the provider
	// says the account's limit lifts (absent when it did not say).
	ResetsAt string `json:"resetsAt,omitempty"`
}

// DeltaData is the data of message.delta and message.completed.
type DeltaData struct {
	Text           string `json:"text"`
	ItemID         string `json:"itemId,omitempty"`
	ProviderTurnID string `json:"providerTurnId,omitempty"`
}

// ApprovalRequestedData is the data of approval.requested.
type ApprovalRequestedData struct {
	RequestID string          `json:"requestId"`
	Kind      string          `json:"kind"`
	ItemID    string          `json:"itemId,omitempty"`
	Detail    json.RawMessage `json:"detail,omitempty"`
	Options   []string        `json:"options,omitempty"`
}

// ApprovalResolvedData is the data of approval.resolved. By is "daemon"
// when the daemon answered (a safe refusal, or a cancel at turn end or
// child exit) and "provider" when the provider withdrew the request.
type ApprovalResolvedData struct {
	RequestID string `json:"requestId"`
	Decision  string `json:"decision"`
	By        string `json:"by,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Origin is the connection whose agentSession.respond answered it
	// (absent when the daemon or the provider resolved it).
	Origin *Origin `json:"origin,omitempty"`
}

// ProviderExitedData is the data of provider.exited.
type ProviderExitedData struct {
	Root     string  `json:"root"`
	Tree     string  `json:"tree"`
	Code     *int    `json:"code"`
	Signal   *string `json:"signal"`
	Expected bool    `json:"expected"`
	// Limit names the cgroup limit the child hit before it exited on its
	// own (memory_limit | pids_limit), when it did.
	Limit string `json:"limit,omitempty"`
	// RuntimeID is the shared runtime that exited (agent-session.runtimes.v1).
	RuntimeID string `json:"runtimeId,omitempty"`
}

// ProviderDetachedData is the data of provider.detached.
type ProviderDetachedData struct {
	RuntimeID string `json:"runtimeId"`
	ThreadID  string `json:"threadId"`
}

// RuntimesV1 reports whether events of type typ are only for connections
// that negotiated agent-session.runtimes.v1.
func RuntimesV1(typ string) bool { return typ == ProviderDetached }

// SessionEndedData is the data of session.ended.
type SessionEndedData struct {
	Reason string `json:"reason"`
}

// ThreadReplacedData is the data of provider.thread_replaced.
type ThreadReplacedData struct {
	OldThreadID string `json:"oldThreadId"`
	NewThreadID string `json:"newThreadId"`
	Cause       string `json:"cause"`
}

// JournalCorruptData is the data of journal.corrupt: why the row stored
// at that seq could not be read.
type JournalCorruptData struct {
	Cause string `json:"cause"`
}

// JournalLossData is the data of journal.loss: how many events were lost
// and why (the store's error). Its top-level turnId is the turn that was
// open then, completed failed (reason journal_loss) right after this row.
type JournalLossData struct {
	Count int    `json:"count"`
	Cause string `json:"cause"`
}
