package config

import (
	"strings"
	"testing"
)

// TestProviderFixTOML: the table an unknown-provider fix suggests is
// valid TOML that configures exactly that provider, whatever the name: a
// dot, a quote, a backslash, a NUL or another control character, a space,
// non-ASCII; a bare key only for [A-Za-z0-9_-]+. A name with a control
// character (a NUL, a tab, an escape) is given no table: the config
// refuses such a name. A name past 32 bytes is
// never cut into the table (the fix says it is too long), nor is one that
// is not UTF-8 given a table (no TOML key names it).
func TestProviderFixTOML(t *testing.T) {
	for _, name := range []string{"mine", "my-agent_2", "a.b", `a"b`, `a\b`, "a b", "ünï", "a]b", strings.Repeat("x", maxFixName)} {
		header, why := providerTable(name)
		if why != "" {
			t.Errorf("%q: no table (%s)", name, why)
			continue
		}
		c := Config{Providers: map[string]Provider{}}
		if err := Parse(header+"\ncommand = [\"my-agent\"]\nprotocol = \"acp\"\n", &c); err != nil {
			t.Errorf("%q: the suggested %s is not valid TOML: %v", name, header, err)
			continue
		}
		if _, ok := c.Providers[name]; !ok || len(c.Providers) != 1 {
			t.Errorf("%q: %s configures %v, not that provider", name, header, keys(c.Providers))
		}
		fix := ProviderFix(name)
		if !strings.Contains(fix, header) || strings.ContainsRune(fix, 0) || strings.Contains(fix, "\x1b") {
			t.Errorf("%q: fix %q does not carry %s, or carries a control character raw", name, fix, header)
		}
		if bareKey.MatchString(name) != !strings.Contains(header, `"`) {
			t.Errorf("%q: header %s: a key is bare exactly when it is [A-Za-z0-9_-]+", name, header)
		}
	}
	for _, name := range []string{"a\x00b", "tab\there", "esc\x1b[31m", "del\x7f"} {
		if header, why := providerTable(name); header != "" || !strings.Contains(why, "control character") {
			t.Errorf("%q: table %q (%s), want none: the config refuses the name", name, header, why)
		}
		if fix := ProviderFix(name); strings.ContainsRune(fix, 0) || strings.Contains(fix, "\x1b") {
			t.Errorf("%q: fix %q carries a control character raw", name, fix)
		}
	}
	long := strings.Repeat("y", maxFixName) + ".z"
	if fix := ProviderFix(long); strings.Contains(fix, "yyyy") || strings.Contains(fix, "…]") || !strings.Contains(fix, "34 bytes, too long to repeat here") {
		t.Errorf("a long name: %q; want no cut name and the length said", fix)
	}
	if fix := ProviderFix("a\xffb"); strings.Contains(fix, "[providers.a") || !strings.Contains(fix, "not UTF-8") {
		t.Errorf("a name that is not UTF-8: %q", fix)
	}
	if fix := ProviderFix("qwen"); !strings.Contains(fix, "npm install -g @qwen-code/qwen-code") || !strings.Contains(fix, "[providers.qwen]") {
		t.Errorf("ProviderFix(qwen) = %s", fix)
	}
}

func keys(m map[string]Provider) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
