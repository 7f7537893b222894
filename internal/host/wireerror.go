package host

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/provider"
)

// The host's translations of its parts' errors into the wire's kinds:
// leaseError (lease refusals) and providerError (adapter errors) here,
// journalError (cursor and feed errors) in journalerror.go. rpc then maps
// each kind to its code and data.reason (internal/rpc/errors.go).

// leaseError translates a lease refusal into the wire's kinds: the one
// place lease errors become api kinds.
func leaseError(id string, err error) error {
	var owned *lease.OwnedError
	if errors.As(err, &owned) {
		return &api.Error{Kind: api.KindSessionOwned, Msg: "session " + id + " is owned by pid " + strconv.Itoa(owned.PID),
			Err: err, Data: map[string]any{"pid": owned.PID}}
	}
	if errors.Is(err, lease.ErrUnverifiable) {
		return &api.Error{Kind: api.KindSessionOwned, Msg: "session " + id + ": lease owner cannot be verified",
			Err: err, Data: map[string]any{"owner": "unverifiable"}}
	}
	if errors.Is(err, lease.ErrStaleFence) {
		return &api.Error{Kind: api.KindStaleFence, Msg: "session " + id + ": " + err.Error(), Err: err}
	}
	if errors.Is(err, lease.ErrBadRecord) {
		return damagedError(id, err)
	}
	return fmt.Errorf("session %s: lease: %w", id, err)
}

// providerKinds is the wire kind of every provider error kind (the
// provider package's sentinels), matched with errors.Is in this order:
// the one place provider errors become api kinds. An error of none of
// them (the provider's own refusal, a write that failed otherwise) is
// provider_failed. A start's failure is provider_failed whatever its kind
// (spawn or handshake failed; a resume of a thread the provider no longer
// has is retried first): the table serves the calls on a live child.
// TestProviderErrorTable fails on a sentinel that has no row.
var providerKinds = []struct {
	err  error
	kind api.Kind
}{
	{provider.ErrDecisionNotAllowed, api.KindInvalidParams}, // data.field "decision", data.allowed
	{provider.ErrRequestNotFound, api.KindRequestNotFound},  // data.requestId
	// The child is exiting or being stopped: the session is no longer live.
	{provider.ErrExited, api.KindSessionNotLive},
	{provider.ErrStopping, api.KindSessionNotLive},
	// A cancel's unanswered interrupt also names step_timeout (noAnswer).
	{provider.ErrTimeout, api.KindProviderFailed},
	// The adapter and the journal disagree on the turn: the provider's fault.
	{provider.ErrTurnRunning, api.KindProviderFailed},
	{provider.ErrNotStarted, api.KindProviderFailed},
	{provider.ErrThreadNotFound, api.KindProviderFailed},
	{provider.ErrLineTooLong, api.KindProviderFailed},
	// A handover's refusals reach the wire inside daemon.upgrade's
	// upgrade_refused (its cause, through ErrNotHandedOver); met by a call
	// on a live child they would be the provider's failure.
	{provider.ErrNoHandover, api.KindProviderFailed},
	{provider.ErrRequestInFlight, api.KindProviderFailed},
	// A mover's "no copy" makes a switch portable: it never reaches the
	// wire; anywhere else it would be the provider's failure.
	{provider.ErrNoThreadCopy, api.KindProviderFailed},
	// A mover's copy over its bound fails the switch (account.switch_failed,
	// the session keeps its account): the provider's failure.
	{provider.ErrThreadCopyTooLarge, api.KindProviderFailed},
}

// providerKind is err's wire kind by providerKinds (provider_failed when
// it is of no kind there).
func providerKind(err error) api.Kind {
	for _, r := range providerKinds {
		if errors.Is(err, r.err) {
			return r.kind
		}
	}
	return api.KindProviderFailed
}

// providerCall names the call on a live child an adapter error came
// from, for the wire error's message and data.
type providerCall struct {
	session   string
	op        string // opSend, opInterrupt, opRespond
	turnID    string // send: the turn not delivered
	requestID string // respond
	decision  string // respond
}

// The calls of providerCall.op.
const (
	opSend      = "send"
	opInterrupt = "interrupt"
	opRespond   = "respond"
)

// providerError translates an adapter's error (non-nil) into the wire's
// kind by providerKinds, with the message and data PROTOCOL.md names for
// it.
func (h *Host) providerError(c providerCall, err error) error {
	switch providerKind(err) {
	case api.KindInvalidParams:
		var de *provider.DecisionError
		errors.As(err, &de)
		var allowed []string
		if de != nil {
			allowed = de.Allowed
		}
		return &api.Error{Kind: api.KindInvalidParams, Msg: fmt.Sprintf("decision: %s is not an option of request %s; allowed: %s",
			api.Quote(c.decision), api.Quote(c.requestID), strings.Join(allowed, ", ")),
			Data: map[string]any{"field": "decision", "allowed": allowed}}
	case api.KindRequestNotFound:
		return &api.Error{Kind: api.KindRequestNotFound, Msg: "session " + c.session + ": no pending approval " + api.Quote(c.requestID),
			Data: map[string]any{"requestId": api.Prefix(c.requestID)}}
	case api.KindSessionNotLive:
		if c.op == opSend {
			// A close (or the child's exit) cancelled the write: the
			// teardown under way completes the turn interrupted.
			return &api.Error{Kind: api.KindSessionNotLive,
				Msg: "session " + c.session + " is being stopped: turn " + c.turnID + " was not delivered", Err: err,
				Data: map[string]any{"turnId": c.turnID}}
		}
		return notLiveStopping(c.session, err)
	case api.KindProviderFailed:
		switch {
		case c.op == opInterrupt && errors.Is(err, provider.ErrTimeout):
			return h.noAnswer(c.session, "the provider did not answer the interrupt", err)
		case c.op == opSend:
			return &api.Error{Kind: api.KindProviderFailed, Msg: "session " + c.session + ": provider refused the turn",
				Err: err, Data: map[string]any{"turnId": c.turnID, "cause": err.Error()}}
		}
	}
	return &api.Error{Kind: api.KindProviderFailed, Msg: "session " + c.session + ": " + c.op, Err: err,
		Data: map[string]any{"cause": err.Error()}}
}

// notLiveStopping is session_not_live for a child found exiting mid-call.
func notLiveStopping(id string, err error) error {
	return &api.Error{Kind: api.KindSessionNotLive, Msg: "session " + id + " has no live provider: its child is exiting", Err: err}
}
