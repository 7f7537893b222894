package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// Capabilities the server offers (PROTOCOL.md).
const (
	CapAttach         = "agent-session.attach.v1"
	CapStructuredHold = "agent-session.structured.hold.v1"
	CapClose          = "agent-session.close.v1"
	CapTurns          = "agent-session.turns.v1"
	CapAdmin          = "daemon.admin.v1"
	CapItems          = "agent-session.items.v1"
	CapApprovalsV2    = "agent-session.approvals.v2"
	CapUpgrade        = "daemon.upgrade.v1"
	CapAttention      = "daemon.attention.v1"
	CapRuntimes       = "agent-session.runtimes.v1"
)

// ProtocolVersion is the wire protocol version this daemon speaks.
const ProtocolVersion = 1

// ExitInfo is SessionInfo.lastExit.
type ExitInfo struct {
	Root   string    `json:"root"`
	Tree   string    `json:"tree"`
	Code   *int      `json:"code"`
	Signal *string   `json:"signal"`
	At     time.Time `json:"at"`
}

// SessionInfo is the wire view of one session.
type SessionInfo struct {
	SessionID   string     `json:"sessionId"`
	Provider    string     `json:"provider"`
	Cwd         string     `json:"cwd"`
	Title       string     `json:"title"`
	CreatedAt   time.Time  `json:"createdAt"`
	State       string     `json:"state"` // stored|starting|live|evicting
	Fence       uint64     `json:"fence"`
	Lease       string     `json:"lease"` // released|reserved|live
	Holders     []string   `json:"holders"`
	Subscribers int        `json:"subscribers"`
	PID         int        `json:"pid,omitempty"`
	ThreadID    string     `json:"threadId,omitempty"`
	TurnRunning bool       `json:"turnRunning"`
	ReleaseAt   *time.Time `json:"releaseAt"`
	LastSeq     uint64     `json:"lastSeq"`
	LastExit    *ExitInfo  `json:"lastExit,omitempty"`
	// LastActivityAt is the time of the journal's last event (absent for
	// an empty journal).
	LastActivityAt *time.Time `json:"lastActivityAt,omitempty"`
	// Cgroup is the live child's cgroup v2 directory (cgroup mode only):
	// ctl show/top read its memory and process count there.
	Cgroup string `json:"cgroup,omitempty"`
	// RuntimeID is the provider process the live session runs on
	// (agent-session.runtimes.v1): shared by every session of a
	// processes="account" profile's account; Account names that account.
	RuntimeID string `json:"runtimeId,omitempty"`
	Account   string `json:"account,omitempty"`
}

// CreateParams is agentSession.create's params.
type CreateParams struct {
	Provider string          `json:"provider"`
	Cwd      string          `json:"cwd"`
	Title    string          `json:"title,omitempty"`
	Options  json.RawMessage `json:"options,omitempty"`
	// Account is one of the profile's accounts (default "default";
	// agent-session.accounts.v1).
	Account string `json:"account,omitempty"`
}

// SessionParams names one session.
type SessionParams struct {
	SessionID string `json:"sessionId"`
}

// ListParams is agentSession.list's params: at most Limit sessions
// (0 = DefaultListSessions) after Cursor (absent = from the oldest).
type ListParams struct {
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// ListResult is agentSession.list's result: one page, oldest first.
// NextCursor is null on the last page; otherwise it is passed back as
// ListParams.Cursor for the next one.
type ListResult struct {
	Sessions   []SessionInfo `json:"sessions"`
	NextCursor *string       `json:"nextCursor"`
}

// HoldParams is agentSession.hold's params.
type HoldParams struct {
	SessionID string `json:"sessionId"`
	HolderID  string `json:"holderId"`
	Surface   string `json:"surface,omitempty"`
	TTLMs     *int64 `json:"ttlMs,omitempty"`
}

// HoldResult is agentSession.hold's result.
type HoldResult struct {
	SessionID string   `json:"sessionId"`
	Fence     uint64   `json:"fence"`
	State     string   `json:"state"`
	Holders   []string `json:"holders"`
	PID       int      `json:"pid"`
	ThreadID  string   `json:"threadId"`
	HoldToken string   `json:"holdToken"`
}

// ReleaseParams is agentSession.release's params.
type ReleaseParams struct {
	SessionID string `json:"sessionId"`
	HolderID  string `json:"holderId"`
	HoldToken string `json:"holdToken,omitempty"`
}

// ReleaseResult is agentSession.release's result.
type ReleaseResult struct {
	Released  bool       `json:"released"`
	Holders   []string   `json:"holders"`
	ReleaseAt *time.Time `json:"releaseAt"`
}

// StepResult is one eviction step as agentSession.close reports it.
type StepResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Ms   int64  `json:"ms"`
}

// CloseResult is agentSession.close's result.
type CloseResult struct {
	Steps []StepResult `json:"steps"`
}

// AttachParams is agentSession.attach's params.
type AttachParams struct {
	SessionID string `json:"sessionId"`
	AfterSeq  uint64 `json:"afterSeq,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// AttachResult is agentSession.attach's result.
type AttachResult struct {
	SubscriptionID string        `json:"subscriptionId"`
	Session        SessionInfo   `json:"session"`
	Events         []event.Event `json:"events"`
	LastSeq        uint64        `json:"lastSeq"`
	HasMore        bool          `json:"hasMore"`
}

// ReadParams is agentSession.read's params.
type ReadParams struct {
	SessionID string `json:"sessionId"`
	AfterSeq  uint64 `json:"afterSeq"`
	Limit     int    `json:"limit,omitempty"`
}

// ReadResult is agentSession.read's result.
type ReadResult struct {
	Events  []event.Event `json:"events"`
	LastSeq uint64        `json:"lastSeq"`
	HasMore bool          `json:"hasMore"`
}

// DetachParams is agentSession.detach's params.
type DetachParams struct {
	SubscriptionID string `json:"subscriptionId"`
}

// SendParams is agentSession.send's params.
type SendParams struct {
	SessionID       string `json:"sessionId"`
	Text            string `json:"text"`
	ClientMessageID string `json:"clientMessageId,omitempty"`
	// Origin is set by rpc from the calling connection, never decoded.
	Origin *event.Origin `json:"-"`
}

// SendResult is agentSession.send's result.
type SendResult struct {
	TurnID    string `json:"turnId"`
	Duplicate bool   `json:"duplicate"`
}

// CancelResult is agentSession.cancel's result.
type CancelResult struct {
	Cancelled bool `json:"cancelled"`
}

// RespondParams is agentSession.respond's params.
type RespondParams struct {
	SessionID string `json:"sessionId"`
	RequestID string `json:"requestId"`
	Decision  string `json:"decision"` // approve|deny (+ approveForSession|cancel with approvals.v2)
	// With approvals.v2: a userInput request's answers (question id ->
	// chosen strings) and an elicitation's content.
	Answers map[string][]string `json:"answers,omitempty"`
	Content json.RawMessage     `json:"content,omitempty"`
	// Origin is set by rpc from the calling connection, never decoded.
	Origin *event.Origin `json:"-"`
}

// EventNotice is the params of the agentSession.event notification.
type EventNotice struct {
	SubscriptionID string      `json:"subscriptionId"`
	Event          event.Event `json:"event"`
}

// LaggedNotice is the params of the agentSession.lagged notification.
type LaggedNotice struct {
	SubscriptionID   string `json:"subscriptionId"`
	LastDeliveredSeq uint64 `json:"lastDeliveredSeq"`
}

// RuntimeInfo is one entry of daemon.status.runtimes (a shared provider
// process; agent-session.runtimes.v1). RSSBytes and PSSBytes are summed
// over the runtime's process tree (its root and descendants) when the
// status is read; 0 where they cannot be read.
type RuntimeInfo struct {
	RuntimeID    string    `json:"runtimeId"`
	Provider     string    `json:"provider"`
	Account      string    `json:"account"`
	PID          int       `json:"pid"`
	Sessions     int       `json:"sessions"`
	TurnsRunning int       `json:"turnsRunning"`
	RSSBytes     int64     `json:"rssBytes"`
	PSSBytes     int64     `json:"pssBytes"`
	StartedAt    time.Time `json:"startedAt"`
}

// SessionCounts is daemon.status's sessions field.
type SessionCounts struct {
	Stored int `json:"stored"`
	Live   int `json:"live"`
}

// Subscription is a live event feed handed to rpc by Attach. Next returns
// events in seq order without gap or duplicate; it returns ErrLagged once
// the subscriber was detached for a full queue (after the events queued
// before that), and ErrSubscriptionClosed after Detach or shutdown.
type Subscription interface {
	ID() string
	Next(ctx context.Context) (event.Event, error)
	// Abandon undoes the Attach that returned it, for a reply that never
	// went out (nothing was read from it): the feed, its place among the
	// connection's subscriptions and a legacy subscription's hold end, as
	// if the attach had failed. After Detach or ConnClosed it does nothing.
	Abandon()
}

// Backend is what rpc needs from the host. ConnID names the connection a
// call came on; holds and subscriptions taken on it end when rpc calls
// ConnClosed.
type Backend interface {
	Create(ctx context.Context, p CreateParams) (SessionInfo, error)
	List(ctx context.Context, p ListParams) (ListResult, error)
	Get(ctx context.Context, id string) (SessionInfo, error)
	Delete(ctx context.Context, id string) error
	Hold(ctx context.Context, conn string, p HoldParams) (HoldResult, error)
	Release(ctx context.Context, conn string, p ReleaseParams) (ReleaseResult, error)
	Close(ctx context.Context, id string) (CloseResult, error)
	// Attach subscribes; legacyHold makes the subscription a hold that
	// starts the provider child (clients without structured.hold.v1).
	Attach(ctx context.Context, conn string, p AttachParams, legacyHold bool) (AttachResult, Subscription, error)
	Read(ctx context.Context, p ReadParams) (ReadResult, error)
	Detach(ctx context.Context, conn string, subscriptionID string) error
	Send(ctx context.Context, p SendParams) (SendResult, error)
	Cancel(ctx context.Context, id string) (CancelResult, error)
	Respond(ctx context.Context, p RespondParams) error
	// ConnClosed ends the holds last taken on conn and its subscriptions.
	ConnClosed(conn string)
	// Counts is daemon.status's sessions; Providers the configured names.
	Counts() SessionCounts
	Providers() []string
	// Stats is daemon.stats's host counters.
	Stats() map[string]any
}

// UpgradeParams are daemon.upgrade's params.
type UpgradeParams struct {
	Binary string `json:"binary,omitempty"` // absolute path; empty: the daemon's own executable
}

// UpgradeResult is daemon.upgrade's result, written by the new image once
// it has taken over.
type UpgradeResult struct {
	FromVersion string `json:"fromVersion"`
	ToVersion   string `json:"toVersion"`
	PID         int    `json:"pid"`
}

// RestartingNotice is the daemon.restarting notification's params: the
// connection closes next (the daemon.upgrade caller's stays open, served
// by the new image); its holds and subscriptions end: reconnect, re-hold
// and re-attach from the cursor.
type RestartingNotice struct {
	FromVersion string `json:"fromVersion"`
	ToVersion   string `json:"toVersion"`
}
