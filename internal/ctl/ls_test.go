package ctl

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/testkit/golden"
)

// TestCtlLsTable: the exact table for fixed sessions: alignment, dashes,
// the turn marker, ages, escaped control characters, the runtime id of
// the sessions on a shared runtime.
func TestCtlLsTable(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	sessions := []api.SessionInfo{
		{SessionID: "s_01", Provider: "echo", State: "stored", Holders: []string{}, Cwd: "/home/me/a", LastActivityAt: at(3 * 24 * time.Hour)},
		{SessionID: "s_02", Provider: "codex", State: "live", Holders: []string{"desktop:w1", "phone:\x1b[2J"}, TurnRunning: true,
			PID: 4242, Title: "fix \x1b[31mred\x1b[0m tests", Cwd: "/home/me/b", LastActivityAt: at(4 * time.Second)},
		{SessionID: "s_03", Provider: "echo", State: "evicting", Holders: []string{}, PID: 77, Title: "idle", Cwd: "/tmp",
			LastActivityAt: at(90 * time.Minute)},
		{SessionID: "s_04", Provider: "echo", State: "stored", Holders: []string{}, Cwd: "/x"},
		{SessionID: "s_05", Provider: "codex", State: "live", Holders: []string{"desktop:w2"}, PID: 4300, RuntimeID: "r_07",
			Title: "shared", Cwd: "/home/me/c", LastActivityAt: at(time.Minute)},
		{SessionID: "s_06", Provider: "codex", State: "live", Holders: []string{"desktop:w3"}, PID: 4300, RuntimeID: "r_07",
			TurnRunning: true, Title: "shared too", Cwd: "/home/me/d", LastActivityAt: at(2 * time.Second)},
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	printLs(tw, sessions, now)
	tw.Flush()
	golden.Check(t, "ctl_ls_table.golden", b.String())
}

// TestCtlLsShortens: titles, cwds and holder ids of any length or script
// keep a row one line of bounded width, its columns aligned by terminal
// cells (a CJK character takes two), never cut inside an escape or a
// UTF-8 sequence; the cut is shown with "…" (a cwd loses its start).
func TestCtlLsShortens(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	huge := strings.Repeat("A\x1b\u202e\r", 1) + "\x1b[2J" + strings.Repeat("é", 32<<10) // 64 KiB
	huge = strings.NewReplacer(`\x1b`, "\x1b", `\u202e`, "\u202e", `\r`, "\r").Replace(huge)
	sessions := []api.SessionInfo{
		{SessionID: "s_01", Provider: "echo", State: "live", Holders: []string{"desktop:w1"}, PID: 7, Title: huge,
			Cwd: "/home/me/" + strings.Repeat("deep/", 40) + "project"},
		{SessionID: "s_02", Provider: "codex", State: "stored", Holders: []string{strings.Repeat("h", 256), "phone:\x1b[2J"},
			Title: strings.Repeat("修复测试", 20), Cwd: "/tmp"},
		{SessionID: "s_03", Provider: strings.Repeat("p", 300), State: "stored", Holders: []string{},
			Title: strings.Repeat("x", titleCells-1) + "\xe4\xbf\xae\xe5", Cwd: "/\xff" + strings.Repeat("ü", 60)},
		{SessionID: "s_04", Provider: "echo", State: "stored", Holders: []string{}, Title: "短い", Cwd: "/x"},
	}
	var b bytes.Buffer
	printLs(&b, sessions, now)
	out := b.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1+len(sessions) {
		t.Fatalf("want one line per session:\n%s", out)
	}
	if !utf8.ValidString(out) || strings.ContainsAny(out, "\x1b\r\u202e") {
		t.Fatalf("invalid UTF-8 or a raw control in the table:\n%q", out)
	}
	// Where the TITLE column starts, in cells, is where each title starts.
	col := displayWidth(lines[0][:strings.Index(lines[0], "TITLE")])
	for i, want := range []string{"A\\x1b\\u202e\\r\\x1b[2Jéé", "修复测试修复", strings.Repeat("x", 8), "短い"} {
		line := lines[i+1]
		if w := displayWidth(line); w > 220 {
			t.Errorf("row %d is %d cells wide:\n%s", i, w, line)
		}
		at := strings.Index(line, want)
		if at < 0 || displayWidth(line[:at]) != col {
			t.Errorf("row %d: title %q not at cell %d:\n%s", i, want, col, line)
		}
	}
	// After a CJK title, the CWD column is still in line.
	cwdCol := displayWidth(lines[0][:strings.Index(lines[0], "CWD")])
	for i, want := range []string{"…p/deep/", "/tmp", "…üü", "/x"} {
		line := lines[i+1]
		if at := strings.LastIndex(line, want); at < 0 || displayWidth(line[:at]) != cwdCol {
			t.Errorf("row %d: cwd %q not at cell %d:\n%s", i, want, cwdCol, line)
		}
	}
	golden.Check(t, "ctl_ls_long.golden", out)
}

func TestFit(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
		tail bool
	}{
		{"short", 10, "short", false},
		{"exactly10!", 10, "exactly10!", false},
		{"eleven1234x", 10, "eleven123…", false},
		{"a\x1b[31mb", 6, "a\\x1b…", false},
		{"a\x1b[31mb", 5, "a…", false}, // never cut an escape in half: \x1b is one unit
		{"修复测试", 7, "修复测…", false},     // 2 cells each
		{"修复测试", 6, "修复…", false},
		{"ab\xe4\xbf", 3, "ab…", false},                // invalid UTF-8: escaped per byte, never cut inside \xe4
		{"e\u0301e\u0301", 2, "e\u0301e\u0301", false}, // combining marks take no cell
		{"e\u0301e\u0301e\u0301", 2, "e\u0301…", false},
		{"/home/me/deep/project", 12, "…eep/project", true},
		{"/home/me/deep/project", 10, "…p/project", true},
		{"", 5, "", false},
	}
	for _, tc := range tests {
		f := fit
		if tc.tail {
			f = fitTail
		}
		got := f(tc.in, tc.max)
		if got != tc.want {
			t.Errorf("fit(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
		if w := displayWidth(got); w > tc.max {
			t.Errorf("fit(%q, %d) = %q: %d cells", tc.in, tc.max, got, w)
		}
	}
}

// TestCtlTopTable: the exact `ctl top` table for fixed rows: a
// per-session session and a shared runtime ordered by CPU, the runtime's
// row (pid, its tree's figures, turns running, sessions) with its
// sessions indented under it, their own figures dashed (they are the
// runtime's); a session whose runtime has no row comes last.
func TestCtlTopTable(t *testing.T) {
	rows := []TopRow{
		{Kind: TopSession, SessionID: "s_02", RuntimeID: "r_07", Provider: "codex", PID: 4300, Turns: 3, TurnRunning: true,
			EventsPerSec: 12.5, Title: "shared too"},
		{Kind: TopSession, SessionID: "s_01", Provider: "echo", PID: 4242, Procs: 1, RSS: 8 << 20, PSS: 3 << 20, pssOK: true,
			Memory: 8 << 20, CPU: 1.5, Turns: 2, Title: "alone"},
		{Kind: TopRuntime, RuntimeID: "r_07", Provider: "codex", PID: 4300, Procs: 3, RSS: 300 << 20, PSS: 120 << 20, pssOK: true,
			Memory: 310 << 20, CPU: 7.5, Sessions: 2, TurnsRunning: 1, EventsPerSec: 12.5, account: "default"},
		{Kind: TopSession, SessionID: "s_03", RuntimeID: "r_07", Provider: "codex", PID: 4300, Turns: 1, Title: "shared"},
		{Kind: TopSession, SessionID: "s_09", RuntimeID: "r_GONE", Provider: "codex", PID: 5000, Title: "its runtime left"},
	}
	sortTopRows(rows)
	var b bytes.Buffer
	writeTopTable(&b, rows)
	golden.Check(t, "ctl_top_table.golden", b.String())
}
