// Package tty is what sessiond knows about terminals: whether a stream is
// one, and escaping the text it prints for a human so that a terminal
// cannot act on it.
package tty

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text that ctl prints for a human comes from clients and providers
// (titles, holder ids, cwd, event data, error messages): a terminal would
// act on an ESC, CR or other control character in it. Safe and
// Text escape those before printing; --json output is left to the
// JSON encoder.

// Safe escapes every C0 control (tab and newline included: they would
// break a table row), DEL, every C1 control, the bidirectional-text
// controls (U+200E/F, U+202A–E, U+2066–9: they reorder what follows them
// on the line) and each byte of invalid UTF-8, as \t \n \r, \xNN or
// \uNNNN.
func Safe(s string) string { return escapeControls(s, false) }

// Text is Safe keeping newlines and tabs, for flowing text such
// as a streamed reply.
func Text(s string) string { return escapeControls(s, true) }

// IsSafe reports that Safe(s) is s, without building a copy.
func IsSafe(s string) bool { return clean(s, false) }

func escapeControls(s string, keepLayout bool) string {
	if clean(s, keepLayout) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, bidi(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clean reports that s holds nothing escapeControls would change.
func clean(s string, keepLayout bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return cleanUTF8(s[i:])
		}
		if (c < 0x20 || c == 0x7f) && !(keepLayout && (c == '\n' || c == '\t')) {
			return false
		}
	}
	return true
}

// cleanUTF8 checks the rest of s rune by rune (C1 controls, bad bytes).
func cleanUTF8(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || bidi(r) {
			return false
		}
		i += size
	}
	return true
}

// bidi reports the invisible controls that reorder text on a line.
func bidi(r rune) bool {
	return r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
