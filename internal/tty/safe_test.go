package tty

import (
	"testing"
)

func TestTermSafe(t *testing.T) {
	tests := []struct{ in, safe, text string }{
		{"plain title", "plain title", "plain title"},
		{"über €", "über €", "über €"},
		{"\x1b[31mred\r", `\x1b[31mred\r`, `\x1b[31mred\r`},
		{"a\tb\nc", `a\tb\nc`, "a\tb\nc"},
		{"del\x7f bell\x07 nul\x00", `del\x7f bell\x07 nul\x00`, `del\x7f bell\x07 nul\x00`},
		{"csi\u009b31m", `csi\u009b31m`, `csi\u009b31m`},
		{"bad\x9b\xffutf8", `bad\x9b\xffutf8`, `bad\x9b\xffutf8`},
		{"é\x1b", `é\x1b`, `é\x1b`},
		{"innocent \u202e(dead) evil\u202c", `innocent \u202e(dead) evil\u202c`, `innocent \u202e(dead) evil\u202c`},
		{"iso\u2066late\u2069 mark\u200f", `iso\u2066late\u2069 mark\u200f`, `iso\u2066late\u2069 mark\u200f`},
	}
	for _, tc := range tests {
		if got := Safe(tc.in); got != tc.safe {
			t.Errorf("Safe(%q) = %q, want %q", tc.in, got, tc.safe)
		}
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}
