package api

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/config"
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

// TestLimitsMatchDoc: docs/protocol.md's "Limits" table states each bound
// of limits.go, on the row naming the field.
func TestLimitsMatchDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Limits\n")
	if start < 0 {
		t.Fatal(`docs/protocol.md has no "## Limits" section`)
	}
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	row := func(name string) string {
		for _, l := range strings.Split(section, "\n") {
			if strings.HasPrefix(l, "| ") && strings.Contains(strings.Split(l, " | ")[0], name) {
				return l
			}
		}
		t.Fatalf("Limits table has no row for %s", name)
		return ""
	}
	tests := []struct {
		name, want string
	}{
		{"`sessionId`", sessionIDRe.String()},
		{"`title`", fmt.Sprintf("%d bytes", MaxTitleBytes)},
		{"`cwd`", fmt.Sprintf("%d bytes", MaxCwdBytes)},
		{"`options`", fmt.Sprintf("%d bytes", MaxOptionsBytes)},
		{"`ttlMs`", fmt.Sprintf("1 .. %d", MaxTTLMs)},
		{"`limit`", fmt.Sprintf("0 .. %d events; 0 or absent: %d", MaxPageEvents, DefaultPageEvents)},
		{"`limit` (list)", fmt.Sprintf("0 .. %d sessions; 0 or absent: %d", MaxListSessions, DefaultListSessions)},
		{"`cursor` (list)", fmt.Sprintf("%d bytes", MaxCursorBytes)},
		{"one message", fmt.Sprintf("default %d", config.DefaultMaxMessageBytes)},
		{"`client.device`", fmt.Sprintf("%d bytes", MaxDeviceBytes)},
	}
	for _, f := range []string{"holderId", "holdToken", "surface", "clientMessageId", "requestId", "subscriptionId", "provider", "client.name", "client.version"} {
		tests = append(tests, struct{ name, want string }{"`" + f + "`", fmt.Sprintf("%d bytes", MaxIDBytes)})
	}
	for _, tc := range tests {
		if r := row(tc.name); !strings.Contains(r, tc.want) {
			t.Errorf("Limits row for %s does not say %q:\n%s", tc.name, tc.want, r)
		}
	}
	if !strings.Contains(section, fmt.Sprintf("first %d bytes", EchoPrefixBytes)) {
		t.Errorf("Limits does not state the %d-byte echo prefix", EchoPrefixBytes)
	}
}
