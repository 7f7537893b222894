package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/ctl"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/golden"
)

// TestE2ECtlRuntimes: the real daemon with echo on processes = "account"
// (two sessions on one runtime, one with a running turn) and a profile of
// the same binary on processes = "session" (one session, its own
// process). `ctl ls` shows each shared session's runtime id; `ctl top
// --once` has one row for the runtime (its pid, its tree's RSS and PSS,
// 2 sessions, 1 turn running) with its two sessions indented under it and
// the per-session session as today; `--json` carries the same rows, in
// the same order. Ids, pids and figures are normalised; cells compared
// one by one.
func TestE2ECtlRuntimes(t *testing.T) {
	cfg := fmt.Sprintf("[providers.echo]\nprocesses = \"account\"\n[providers.solo]\ncommand = [%q, \"provider\", \"echo\"]\nprotocol = \"codex-app-server\"\n",
		daemontest.Binary(t))
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	names := map[string]string{} // id -> placeholder
	open := func(provider, title, name string) api.HoldResult {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: provider, Cwd: dir, Title: title}, &s); err != nil {
			t.Fatal(err)
		}
		names[s.SessionID] = name
		if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
			t.Fatal(err)
		}
		var h api.HoldResult
		if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "w"}, &h); err != nil {
			t.Fatal(err)
		}
		h.SessionID = s.SessionID
		return h
	}
	a, b, solo := open("echo", "shared a", "<A>"), open("echo", "shared b", "<B>"), open("solo", "alone", "<SOLO>")
	if a.PID != b.PID || a.PID == solo.PID {
		t.Fatalf("pids: a %d b %d solo %d: want a and b on one process, solo on its own", a.PID, b.PID, solo.PID)
	}
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: b.SessionID, Text: "/sleep 600000"}, nil); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, rec.ch, event.TurnStarted)
	var si api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: a.SessionID}, &si); err != nil {
		t.Fatal(err)
	}
	runtimeID := si.RuntimeID
	norm := func(out string) string {
		pairs := []string{runtimeID, "<R>", dir, "<CWD>"}
		for id, name := range names {
			pairs = append(pairs, id, name)
		}
		out = strings.NewReplacer(pairs...).Replace(out)
		out = regexp.MustCompile(`\b\d+[smhd] ago\b|just now`).ReplaceAllString(out, "<AGO>")
		out = regexp.MustCompile(`\b`+strconv.Itoa(a.PID)+`\b`).ReplaceAllString(out, "<RPID>")
		out = regexp.MustCompile(`\b`+strconv.Itoa(solo.PID)+`\b`).ReplaceAllString(out, "<PID>")
		out = regexp.MustCompile(`\b\d+(\.\d)?[KMG]\b`).ReplaceAllString(out, "<SIZE>")
		out = regexp.MustCompile(`\b\d+\.\d\b`).ReplaceAllString(out, "<RATE>")
		var cells strings.Builder
		for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			indent := ""
			if strings.HasPrefix(line, "  ") {
				indent = "  "
			}
			cells.WriteString(indent + strings.Join(regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1), " | ") + "\n")
		}
		return cells.String()
	}
	code, out, errOut := runCtl(t, d.Socket, dir, "ls")
	if code != 0 {
		t.Fatalf("ls: exit %d %s", code, errOut)
	}
	golden.Check(t, "ctl_ls_runtimes.golden", norm(out))

	code, out, errOut = runCtl(t, d.Socket, dir, "top", "--once", "--interval", "100ms")
	if code != 0 || !strings.HasPrefix(out, ctl.TopHeading) {
		t.Fatalf("top --once: exit %d %s\n%s", code, errOut, out)
	}
	golden.Check(t, "ctl_top_runtimes.golden", byGroup(norm(strings.TrimPrefix(out, ctl.TopHeading))))

	code, out, errOut = runCtl(t, d.Socket, dir, "--json", "top", "--once", "--interval", "100ms")
	var rows []ctl.TopRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
		t.Fatalf("--json top --once: exit %d %q %s", code, out, errOut)
	}
	var got strings.Builder
	byKind := map[string]ctl.TopRow{}
	for _, r := range rows {
		indent := ""
		if r.Kind == ctl.TopSession && r.RuntimeID != "" {
			indent = "  "
		}
		fmt.Fprintf(&got, "%s%s %s %s\n", indent, r.Kind, names[r.SessionID], strings.ReplaceAll(r.RuntimeID, runtimeID, "<R>"))
		byKind[r.Kind+names[r.SessionID]] = r
	}
	want := "runtime  <R>\n  session <A> <R>\n  session <B> <R>\nsession <SOLO> \n"
	if byGroup("h\n"+got.String()) != byGroup("h\n"+want) {
		t.Fatalf("--json rows:\n%s\nwant (groups in any order):\n%s", got.String(), want)
	}
	if r := byKind["runtime"]; r.PID != a.PID || r.Sessions != 2 || r.TurnsRunning != 1 || r.RSS == 0 || r.PSS == 0 || r.PSS > r.RSS || r.Procs < 1 {
		t.Fatalf("runtime row %+v: want pid %d, 2 sessions, 1 turn running, 0 < PSS <= RSS", r, a.PID)
	}
	if r := byKind["session<A>"]; r.PID != a.PID || r.RSS != 0 || r.Procs != 0 {
		t.Fatalf("a shared session's row has figures of its own: %+v", r)
	}
	if r := byKind["session<SOLO>"]; r.PID != solo.PID || r.RSS == 0 || r.PSS == 0 || r.Procs != 1 {
		t.Fatalf("the per-session row %+v", r)
	}
	if err := c.Call(ctx10(t), "agentSession.cancel", api.SessionParams{SessionID: b.SessionID}, &api.CancelResult{}); err != nil {
		t.Fatal(err)
	}
}

// byGroup orders a table's groups (a top-level row and the indented rows
// under it) by their text, and the rows in a group too, after the header
// line: `ctl top` orders groups by CPU and a group's rows by session id,
// which a test does not control.
func byGroup(table string) string {
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	var groups [][]string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "  ") && len(groups) > 0 {
			groups[len(groups)-1] = append(groups[len(groups)-1], l)
		} else {
			groups = append(groups, []string{l})
		}
	}
	var out []string
	for _, g := range groups {
		slices.Sort(g[1:])
		out = append(out, strings.Join(g, "\n")+"\n")
	}
	slices.Sort(out)
	return lines[0] + "\n" + strings.Join(out, "")
}
