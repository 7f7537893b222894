package api

import (
	"context"
	"fmt"
	"regexp"
)

// CapAccounts: named accounts of a provider profile (PROTOCOL.md
// "Accounts"): create's account, switchAccount, listAccounts and the
// account.* events.
const CapAccounts = "agent-session.accounts.v1"

// MaxAccountBytes bounds an account name on the wire (config's
// MaxAccountName).
const MaxAccountBytes = 64

var accountName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// checkAccount refuses a value that cannot be an account name (an unknown
// one is the host's unknown_account).
func checkAccount(field, v string, required bool) error {
	if v == "" && !required {
		return nil
	}
	if len(v) > MaxAccountBytes || !accountName.MatchString(v) {
		return &Error{Kind: KindInvalidParams,
			Msg:  fmt.Sprintf("%s %s: want 1 to %d letters, digits, \"_\", \"-\" or \".\", starting with a letter or digit", field, Quote(v), MaxAccountBytes),
			Data: map[string]any{"field": field, "limit": MaxAccountBytes}}
	}
	return nil
}

// When values of switchAccount.
const (
	SwitchWhenIdle = "idle"
	SwitchWhenNow  = "now"
)

// SwitchAccountParams is agentSession.switchAccount's params.
type SwitchAccountParams struct {
	SessionID string `json:"sessionId"`
	Account   string `json:"account"`
	When      string `json:"when,omitempty"` // "idle" (default) or "now"
}

// Validate checks switchAccount's params.
func (p SwitchAccountParams) Validate() error {
	if err := CheckSessionID("sessionId", p.SessionID); err != nil {
		return err
	}
	if err := checkAccount("account", p.Account, true); err != nil {
		return err
	}
	if p.When != "" && p.When != SwitchWhenIdle && p.When != SwitchWhenNow {
		return &Error{Kind: KindInvalidParams, Msg: fmt.Sprintf("when %s: want %q or %q", Quote(p.When), SwitchWhenIdle, SwitchWhenNow),
			Data: map[string]any{"field": "when"}}
	}
	return nil
}

// SwitchAccountResult is agentSession.switchAccount's result: switched
// (applied now), queued (waits for the running turn's end), and the
// account the session runs under (or will, when queued).
type SwitchAccountResult struct {
	Switched bool   `json:"switched"`
	Queued   bool   `json:"queued"`
	Account  string `json:"account"`
}

// ListAccountsParams is agentSession.listAccounts's params.
type ListAccountsParams struct {
	Provider string `json:"provider,omitempty"`
}

// Validate checks listAccounts's params.
func (p ListAccountsParams) Validate() error {
	if p.Provider == "" {
		return nil
	}
	return CheckID("provider", p.Provider)
}

// AccountInfo is one account in listAccounts: LimitedUntil (RFC 3339) is
// set while a rate limit marks it; Sessions counts the live sessions
// running under it, Runtimes its live shared runtimes.
type AccountInfo struct {
	Provider     string  `json:"provider"`
	Name         string  `json:"name"`
	LimitedUntil *string `json:"limitedUntil"`
	Sessions     int     `json:"sessions"`
	Runtimes     int     `json:"runtimes"`
}

// ListAccountsResult is agentSession.listAccounts's result.
type ListAccountsResult struct {
	Accounts []AccountInfo `json:"accounts"`
}

// AccountBackend is what the accounts methods need from the host.
type AccountBackend interface {
	SwitchAccount(ctx context.Context, p SwitchAccountParams) (SwitchAccountResult, error)
	ListAccounts(ctx context.Context, p ListAccountsParams) (ListAccountsResult, error)
}
