package provider

import (
	"encoding/json"
	"testing"
)

func TestRequestKey(t *testing.T) {
	cases := []struct {
		raw, key string
		ok       bool
	}{
		{`9`, `9`, true}, {`"9"`, `"9"`, true}, {`-0`, `0`, true}, {`1.5`, `1.5`, true}, {`"1.5"`, `"1.5"`, true},
		{`"req-7"`, `req-7`, true}, {`"0f3a-uuid"`, `0f3a-uuid`, true}, {`"\"9\""`, `"\"9\""`, true},
		{`""`, ``, true}, {`"-x"`, `-x`, true}, {`null`, ``, false}, {`{}`, ``, false}, {`[1]`, ``, false},
		{`true`, ``, false}, {``, ``, false}, {`"unterminated`, ``, false},
	}
	seen := map[string]string{}
	for _, c := range cases {
		key, ok := RequestKey(json.RawMessage(c.raw))
		if key != c.key || ok != c.ok {
			t.Errorf("RequestKey(%s) = %q, %v; want %q, %v", c.raw, key, ok, c.key, c.ok)
		}
		if !ok {
			continue
		}
		if other, dup := seen[key]; dup && other != c.raw {
			t.Errorf("%s and %s share the key %q", c.raw, other, key)
		}
		seen[key] = c.raw
	}
}
