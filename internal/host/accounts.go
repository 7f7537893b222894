package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/store"
)

// Accounts (PROTOCOL.md "Accounts"): an account is a named env of a
// profile (Provider.Accounts), "default" being the profile's own env. A
// record pins its account's name and env; a shared profile's sessions run
// on their account's runtime, keyed (profile, account). Rate-limited
// accounts are remembered in Host.limited (map lock) until their limit
// lifts.

// defaultAccount is the account whose env is the profile's own.
const defaultAccount = config.DefaultAccount

// defaultLimit is how long an account stays limited when the provider
// did not say when its limit lifts.
const defaultLimit = 15 * time.Minute

// accountOf is the account a record's session runs under: the one it
// pins; for a record from before accounts, the default one when its
// pinned env is the profile's, else one named by the env's digest (two
// envs never share a process: a process holds one account's credentials).
func accountOf(rec store.Record, prov Provider) string {
	if rec.Account != "" {
		return rec.Account
	}
	if len(rec.Env) == 0 && len(prov.Env) == 0 || maps.Equal(rec.Env, prov.Env) {
		return defaultAccount
	}
	keys := slices.Sorted(maps.Keys(rec.Env))
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\x00", k, rec.Env[k])
	}
	return "env-" + hex.EncodeToString(h.Sum(nil)[:6])
}

// hasAccount reports whether prov has the account an.
func (p Provider) hasAccount(an string) bool {
	_, ok := p.Accounts[an]
	return an == defaultAccount || ok
}

// accountNames lists prov's accounts, default first.
func (p Provider) accountNames() []string {
	return append([]string{defaultAccount}, slices.Sorted(maps.Keys(p.Accounts))...)
}

// accountEnv is the env a record of account an pins: the profile's env
// overlaid with the account's.
func (p Provider) accountEnv(an string) map[string]string {
	env := maps.Clone(p.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, p.Accounts[an])
	return env
}

// envLookup looks a variable up as a process of env gets it: env over
// the daemon's own environment.
func envLookup(env map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
}

// unknownAccount is the unknown_account error of an on prov.
func unknownAccount(prov Provider, an string) error {
	known := prov.accountNames()
	return &api.Error{Kind: api.KindUnknownAccount,
		Msg:  fmt.Sprintf("provider %s has no account %s (known: %s)", prov.Name, api.Quote(an), strings.Join(known, ", ")),
		Data: map[string]any{"provider": prov.Name, "account": api.Prefix(an), "known": known}}
}

// limitedUntil is when the account's rate limit lifts (zero: not
// limited). Needs the map lock.
func (h *Host) limitedUntilMapLocked(k runtimeKey) time.Time {
	t, ok := h.limited[k]
	if !ok {
		return time.Time{}
	}
	if !h.clock.Now().Before(t) {
		delete(h.limited, k)
		return time.Time{}
	}
	return t
}

// ListAccounts implements agentSession.listAccounts: every account of
// every profile (or of p.Provider), with its limit and how many live
// sessions and runtimes run under it.
func (h *Host) ListAccounts(_ context.Context, p api.ListAccountsParams) (api.ListAccountsResult, error) {
	names := h.Providers()
	if p.Provider != "" {
		prov, ok := h.o.Providers[p.Provider]
		if !ok {
			return api.ListAccountsResult{}, &api.Error{Kind: api.KindUnknownProvider,
				Msg:  fmt.Sprintf("unknown provider %s (known: %s)", api.Quote(p.Provider), strings.Join(names, ", ")),
				Data: map[string]any{"provider": api.Prefix(p.Provider), "known": names}}
		}
		names = []string{prov.Name}
		if prov.Name == "" {
			names = []string{p.Provider}
		}
	}
	out := api.ListAccountsResult{Accounts: []api.AccountInfo{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, pn := range names {
		prov := h.o.Providers[pn]
		for _, an := range prov.accountNames() {
			k := runtimeKey{profile: pn, account: an}
			ai := api.AccountInfo{Provider: pn, Name: an}
			if t := h.limitedUntilMapLocked(k); !t.IsZero() {
				s := t.UTC().Format(time.RFC3339)
				ai.LimitedUntil = &s
			}
			if rt := h.runtimes[k]; rt != nil {
				ai.Runtimes = 1
			}
			for _, e := range h.sessions {
				if e.state != StateStored && e.profile == pn && e.account == an {
					ai.Sessions++
				}
			}
			out.Accounts = append(out.Accounts, ai)
		}
	}
	return out, nil
}
