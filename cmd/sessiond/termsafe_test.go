package main

import "testing"

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
	}
	for _, tc := range tests {
		if got := termSafe(tc.in); got != tc.safe {
			t.Errorf("termSafe(%q) = %q, want %q", tc.in, got, tc.safe)
		}
		if got := termText(tc.in); got != tc.text {
			t.Errorf("termText(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}
