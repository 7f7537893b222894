package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/daemontest"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
)

// TestE2ECtlTop: `ctl top --once` prints one table of the live sessions
// with the provider child's pid, its RSS and CPU from /proc (gopsutil),
// the turns the journal holds and events/s; a stored session is not in it.
func TestE2ECtlTop(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	var live, stored api.SessionInfo
	for _, s := range []*api.SessionInfo{&live, &stored} {
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir}, s); err != nil {
			t.Fatal(err)
		}
	}
	var at api.AttachResult
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: live.SessionID}, &at); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: live.SessionID, HolderID: "t"}, &h); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"one", "two"} {
		var sr api.SendResult
		if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: live.SessionID, Text: text}, &sr); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		waitEvent(t, rec.ch, event.TurnCompleted)
	}

	code, out, errOut := runCtl(t, d.Socket, dir, "top", "--once", "--interval", "100ms")
	if code != 0 {
		t.Fatalf("top --once: exit %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^ID\s+PROVIDER\s+PID\s+RSS\s+MEM\s+PROCS\s+CPU%\s+TURNS\s+TURN\s+EVENTS/S\s+TITLE$`).MatchString(lines[0]) {
		t.Fatalf("top --once: want a header and one live session:\n%s", out)
	}
	row := regexp.MustCompile(`^` + regexp.QuoteMeta(live.SessionID) + `\s+echo\s+` + strconv.Itoa(h.PID) +
		`\s+\d+(\.\d)?[KMG]\s+\d+(\.\d)?[KMG]\s+1\s+\d+\.\d\s+2\s+-\s+\d+\.\d\s+-$`)
	if !row.MatchString(lines[1]) {
		t.Fatalf("row %q: want id, echo, pid %d, RSS, CPU, 2 turns, no turn running, events/s", lines[1], h.PID)
	}

	code, out, errOut = runCtl(t, d.Socket, dir, "--json", "top", "--once", "--interval", "50ms")
	var rows []struct {
		SessionID string `json:"sessionId"`
		PID       int    `json:"pid"`
		RSS       uint64 `json:"rssBytes"`
		Turns     int    `json:"turns"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
		t.Fatalf("--json top --once: exit %d %q %s", code, out, errOut)
	}
	if r := rows[0]; r.SessionID != live.SessionID || r.PID != h.PID || r.RSS == 0 || r.Turns != 2 {
		t.Fatalf("row %+v: want %s pid %d, RSS > 0, 2 turns", r, live.SessionID, h.PID)
	}
	if code, _, errOut = runCtl(t, d.Socket, dir, "top", "--interval", "1ms"); code != exitUsage || !strings.Contains(errOut, "at least 10ms") {
		t.Fatalf("--interval 1ms: exit %d %s", code, errOut)
	}
}
