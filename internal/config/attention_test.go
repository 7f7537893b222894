package config

import (
	"errors"
	"strings"
	"testing"
)

// TestAttentionKeys: keep_awake and notify default to true and "none",
// take their values, and a bad value is refused naming the key and what
// it wants.
func TestAttentionKeys(t *testing.T) {
	noCodex(t)
	c := Default()
	if !c.KeepAwake || c.Notify != NotifyNone {
		t.Fatalf("defaults: keep_awake %v notify %q, want true \"none\"", c.KeepAwake, c.Notify)
	}
	if err := Parse("keep_awake = false\nnotify = \"desktop\"\n", &c); err != nil {
		t.Fatal(err)
	}
	if c.KeepAwake || c.Notify != NotifyDesktop {
		t.Fatalf("parsed: keep_awake %v notify %q", c.KeepAwake, c.Notify)
	}
	for _, tc := range []struct{ name, text, has string }{
		{"keep_awake string", "keep_awake = \"yes\"\n", `keep_awake`},
		{"keep_awake int", "keep_awake = 1\n", `true or false`},
		{"notify other", "notify = \"email\"\n", `notify = "email": want "none" or "desktop"`},
		{"notify bool", "notify = true\n", `notify`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			err := Parse(tc.text, &c)
			if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("err = %v, want ErrBadValue naming %q", err, tc.has)
			}
		})
	}
}
