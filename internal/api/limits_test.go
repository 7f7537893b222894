package api

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrefix(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{strings.Repeat("a", 32), strings.Repeat("a", 32)},
		{strings.Repeat("a", 33), strings.Repeat("a", 32) + "…"},
		// a 3-byte rune straddling byte 32 is dropped whole
		{strings.Repeat("a", 31) + "€€", strings.Repeat("a", 31) + "…"},
	}
	for _, tc := range tests {
		got := Prefix(tc.in)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Prefix(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if q := Quote("\x1b[31m" + strings.Repeat("x", 100)); strings.ContainsRune(q, 0x1b) || len(q) > 48 {
		t.Errorf("Quote = %q: raw ESC or too long", q)
	}
}

func TestTooLongIsInvalidParams(t *testing.T) {
	err := CheckID("holderId", strings.Repeat("h", MaxIDBytes+1))
	if !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("err = %v", err)
	}
	var e *Error
	errors.As(err, &e)
	if e.Data["field"] != "holderId" || e.Data["limit"] != MaxIDBytes || strings.Contains(e.Msg, strings.Repeat("h", 33)) {
		t.Fatalf("error %+v", e)
	}
	if err := CheckID("holderId", strings.Repeat("h", MaxIDBytes)); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	if err := CheckOptionalID("surface", ""); err != nil {
		t.Fatalf("optional empty: %v", err)
	}
}
