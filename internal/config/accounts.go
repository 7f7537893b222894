package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Accounts (PROTOCOL.md "Accounts"): named environments of a provider
// profile, [providers.P.accounts.NAME] env = {...}, and the order
// failover = [...] tries them in when one is rate-limited. The profile's
// own env is the account DefaultAccount: it cannot be defined again under
// accounts (its env is providers.P.env), but failover may name it.

// DefaultAccount is the account whose env is the profile's own.
const DefaultAccount = "default"

// MaxAccountName is the longest account name.
const MaxAccountName = 64

// MaxAccounts bounds the accounts of one profile.
const MaxAccounts = 64

// DefaultPortableHistoryBytes bounds the history a portable switch
// carries into a fresh thread's first turn (portable_history_bytes).
const DefaultPortableHistoryBytes = 256 << 10

// validAccount is an account name: a letter or digit, then letters,
// digits, "_", "-" or ".".
var validAccount = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Account is one named environment of a profile.
type Account struct {
	Env map[string]string
}

type fileAccount struct {
	Env map[string]string `toml:"env"`
}

// applyAccounts sets p's accounts and failover from fp, refusing a bad
// name, a redefined default, an env key exec would refuse, and a failover
// list naming an account the profile does not have (or one twice).
func applyAccounts(name string, fp fileProvider, p *Provider) error {
	field := "providers." + prefix(name)
	if fp.Accounts != nil {
		if len(fp.Accounts) > MaxAccounts {
			return fmt.Errorf("%w: %s.accounts: %d accounts, at most %d", ErrBadValue, field, len(fp.Accounts), MaxAccounts)
		}
		p.Accounts = make(map[string]Account, len(fp.Accounts))
		for _, an := range slices.Sorted(maps.Keys(fp.Accounts)) {
			if err := CheckAccountName(an); err != nil {
				return fmt.Errorf("%w: %s.accounts.%q: %v", ErrBadValue, field, prefix(an), err)
			}
			if an == DefaultAccount {
				return fmt.Errorf("%w: %s.accounts.%s: %q is the profile's own env (set %s.env instead)",
					ErrBadValue, field, an, DefaultAccount, field)
			}
			env := fp.Accounts[an].Env
			for _, k := range slices.Sorted(maps.Keys(env)) {
				if k == "" || strings.ContainsAny(k, "=\x00") {
					return fmt.Errorf("%w: %s.accounts.%s.env key %q: want a name without \"=\" or NUL", ErrBadValue, field, an, prefix(k))
				}
				if strings.IndexByte(env[k], 0) >= 0 {
					return fmt.Errorf("%w: %s.accounts.%s.env.%s = %q: holds a NUL byte", ErrBadValue, field, an, prefix(k), prefix(env[k]))
				}
			}
			p.Accounts[an] = Account{Env: maps.Clone(env)}
		}
	}
	if fp.Failover != nil {
		seen := map[string]bool{}
		for i, an := range fp.Failover {
			if !p.HasAccount(an) {
				return fmt.Errorf("%w: %s.failover[%d] = %q: no such account (known: %s)", ErrBadValue, field, i, prefix(an),
					strings.Join(p.AccountNames(), ", "))
			}
			if seen[an] {
				return fmt.Errorf("%w: %s.failover[%d] = %q: named twice", ErrBadValue, field, i, prefix(an))
			}
			seen[an] = true
		}
		p.Failover = slices.Clone(fp.Failover)
	}
	return nil
}

// CheckAccountName refuses a name that is not an account name.
func CheckAccountName(an string) error {
	if an == "" || len(an) > MaxAccountName || !validAccount.MatchString(an) {
		return fmt.Errorf("want 1 to %d letters, digits, \"_\", \"-\" or \".\", starting with a letter or digit", MaxAccountName)
	}
	return nil
}

// HasAccount reports whether the profile has the account an (default
// always).
func (p Provider) HasAccount(an string) bool {
	_, ok := p.Accounts[an]
	return an == DefaultAccount || ok
}

// AccountNames lists the profile's accounts, default first, then sorted.
func (p Provider) AccountNames() []string {
	return append([]string{DefaultAccount}, slices.Sorted(maps.Keys(p.Accounts))...)
}
