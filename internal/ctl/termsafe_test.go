package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/daemontest"
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
		if got := termSafe(tc.in); got != tc.safe {
			t.Errorf("termSafe(%q) = %q, want %q", tc.in, got, tc.safe)
		}
		if got := termText(tc.in); got != tc.text {
			t.Errorf("termText(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}

// TestCtlEscapesSocketPath: the socket path ctl names in its errors is
// escaped like every other text it prints.
func TestCtlEscapesSocketPath(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "x\x1b]0;PWN\x07\x1b[31m\ry.sock")
	for _, args := range [][]string{{"--socket", sock, "status"}, {"--socket", sock, "doctor"}} {
		cmd := exec.Command(daemontest.Binary(t), append([]string{"ctl"}, args...)...)
		out, _ := cmd.CombinedOutput()
		if strings.ContainsAny(string(out), "\x1b\x07\r") {
			t.Fatalf("ctl %v printed raw control characters: %q", args, out)
		}
	}
}
