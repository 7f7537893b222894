package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/daemontest"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/name (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (-update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestCtlLsTable: the exact table for fixed sessions: alignment, dashes,
// the turn marker, ages, escaped control characters.
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
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	printLs(tw, sessions, now)
	tw.Flush()
	golden(t, "ctl_ls_table.golden", b.String())
}

// TestE2ECtlLs: `ctl ls` through the real binary and daemon: a stored
// session, and a live one with a holder, a running turn (echo's /sleep)
// and a title with control characters. Ids, pids, paths and ages are
// normalised; columns are compared cell by cell.
func TestE2ECtlLs(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	var a, b api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Title: "stored one"}, &a); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir, Title: "busy \x1b[31mred\x1b[0m"}, &b); err != nil {
		t.Fatal(err)
	}
	var at api.AttachResult
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: b.SessionID}, &at); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: b.SessionID, HolderID: "desktop:w1"}, &h); err != nil {
		t.Fatal(err)
	}
	var sr api.SendResult
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: b.SessionID, Text: "/sleep 600000"}, &sr); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, rec.ch, event.TurnStarted)
	code, out, errOut := runCtl(t, d.Socket, dir, "ls")
	if code != 0 {
		t.Fatalf("ls: exit %d %s", code, errOut)
	}
	norm := strings.NewReplacer(a.SessionID, "<A>", b.SessionID, "<B>", dir, "<CWD>").Replace(out)
	norm = regexp.MustCompile(`\b\d+[smhd] ago\b|just now`).ReplaceAllString(norm, "<AGO>")
	norm = regexp.MustCompile(`(?m)^(<B>.*\s)`+strconv.Itoa(h.PID)+`(\s)`).ReplaceAllString(norm, "${1}<PID>${2}")
	var cells strings.Builder
	for _, line := range strings.Split(strings.TrimRight(norm, "\n"), "\n") {
		cells.WriteString(strings.Join(regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1), " | ") + "\n")
	}
	golden(t, "ctl_ls_e2e.golden", cells.String())
	if err := c.Call(ctx10(t), "agentSession.cancel", api.SessionParams{SessionID: b.SessionID}, &api.CancelResult{}); err != nil {
		t.Fatal(err)
	}
}
