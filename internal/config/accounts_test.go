package config

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAccountsLoad(t *testing.T) {
	c := Default()
	err := Parse(`portable_history_bytes = 4096
[providers.x]
command = ["x"]
env = { HOME_X = "/d" }
failover = ["work", "default"]
[providers.x.accounts.work]
env = { HOME_X = "/w" }
[providers.x.accounts."me.2"]
env = {}
`, &c)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers["x"]
	if p.Accounts["work"].Env["HOME_X"] != "/w" || !slices.Equal(p.Failover, []string{"work", "default"}) || c.PortableHistoryBytes != 4096 {
		t.Fatalf("got %+v (portable %d)", p, c.PortableHistoryBytes)
	}
	if got := p.AccountNames(); !slices.Equal(got, []string{"default", "me.2", "work"}) {
		t.Fatalf("names %v", got)
	}
	if d := Default(); d.PortableHistoryBytes != DefaultPortableHistoryBytes {
		t.Fatalf("default portable %d", d.PortableHistoryBytes)
	}
	full, err := Load(filepath.Join("..", "..", "testdata", "configs", "full.toml"), true)
	if err != nil || full.Providers["codex"].Accounts["work"].Env["CODEX_HOME"] != "/home/me/.codex-work" {
		t.Fatalf("full.toml: %v %+v", err, full.Providers["codex"])
	}
}

func TestAccountsRefused(t *testing.T) {
	for _, tc := range []struct{ name, text, has string }{
		{"failover unknown", "[providers.x]\ncommand=[\"x\"]\nfailover=[\"nope\"]\n", `failover[0] = "nope": no such account (known: default)`},
		{"failover twice", "[providers.x]\ncommand=[\"x\"]\nfailover=[\"a\",\"a\"]\n[providers.x.accounts.a]\nenv={}\n", "named twice"},
		{"default redefined", "[providers.x]\ncommand=[\"x\"]\n[providers.x.accounts.default]\nenv={A=\"b\"}\n", "the profile's own env"},
		{"bad name", "[providers.x]\ncommand=[\"x\"]\n[providers.x.accounts.\"a b\"]\nenv={}\n", "accounts.\"a b\""},
		{"long name", "[providers.x]\ncommand=[\"x\"]\n[providers.x.accounts." + strings.Repeat("a", 65) + "]\nenv={}\n", "1 to 64"},
		{"bad env key", "[providers.x]\ncommand=[\"x\"]\n[providers.x.accounts.a]\nenv={\"A=B\"=\"c\"}\n", "env key"},
		{"unknown key", "[providers.x]\ncommand=[\"x\"]\n[providers.x.accounts.a]\nenvv={}\n", "providers.x.accounts.a.envv"},
		{"failover type", "[providers.x]\ncommand=[\"x\"]\nfailover=\"a\"\n", "failover"},
		{"portable range", "portable_history_bytes = 10\n", "portable_history_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			err := Parse(tc.text, &c)
			if err == nil || !strings.Contains(err.Error(), tc.has) || !(errors.Is(err, ErrBadValue) || errors.Is(err, ErrUnknownKey)) {
				t.Fatalf("err = %v, want one naming %q", err, tc.has)
			}
		})
	}
}
