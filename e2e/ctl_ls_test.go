package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/golden"
)

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
	golden.Check(t, "ctl_ls_e2e.golden", cells.String())
	if err := c.Call(ctx10(t), "agentSession.cancel", api.SessionParams{SessionID: b.SessionID}, &api.CancelResult{}); err != nil {
		t.Fatal(err)
	}
}
