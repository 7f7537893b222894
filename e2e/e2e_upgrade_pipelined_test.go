package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/frametest"
)

// TestE2EUpgradePipelinedAhead: calls written in one go right ahead of
// daemon.upgrade on the caller's own connection (a hold starting the
// child, a hundred attaches, a send) are each run once and answered before
// the upgrade's answer, in either framing; the call behind it is answered
// by the new image after it. Before, the queued ones were held by the old
// image's call gate at the exec and never answered on a connection that
// stayed open.
func TestE2EUpgradePipelinedAhead(t *testing.T) {
	v2 := daemontest.BinaryVersion(t, upgradeVersion)
	d := daemontest.Start(t, daemontest.Options{})
	const attaches = 100
	for _, header := range []bool{false, true} {
		var s api.SessionInfo
		if err := d.Client(t).Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
			t.Fatal(err)
		}
		r := dialRaw(t, d.Socket, header)
		r.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.attach.v1","agent-session.structured.hold.v1","agent-session.turns.v1","daemon.upgrade.v1"]}}`)
		if resp := r.recv(); resp["result"] == nil {
			t.Fatalf("initialize: %v", resp)
		}
		var b strings.Builder
		ahead := []string{"hold"}
		b.WriteString(frametest.Frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":"hold","method":"agentSession.hold","params":{"sessionId":%q,"holderId":"p"}}`, s.SessionID), header))
		for i := range attaches {
			id := fmt.Sprintf("a%d", i)
			ahead = append(ahead, id)
			b.WriteString(frametest.Frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"agentSession.attach","params":{"sessionId":%q}}`, id, s.SessionID), header))
		}
		ahead = append(ahead, "send")
		b.WriteString(frametest.Frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":"send","method":"agentSession.send","params":{"sessionId":%q,"text":"hi"}}`, s.SessionID), header))
		b.WriteString(frametest.Frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":"UP","method":"daemon.upgrade","params":{"binary":%q}}`, v2), header))
		b.WriteString(frametest.Frame(`{"jsonrpc":"2.0","id":"behind","method":"daemon.status"}`, header))
		r.write(b.String())
		// Read until both the upgrade and the call behind it are answered
		// (or the connection goes quiet): every answer, in order.
		var order []string
		answers := map[string]map[string]any{}
		r.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
		for answers["UP"] == nil || answers["behind"] == nil {
			body, err := frametest.Read(r.br, header)
			if err != nil {
				break
			}
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("bad message %q: %v", body, err)
			}
			if m["method"] != nil {
				continue // a notification
			}
			id := fmt.Sprint(m["id"])
			if answers[id] != nil {
				t.Fatalf("header=%v: %s answered twice", header, id)
			}
			answers[id] = m
			order = append(order, id)
			if id == "UP" || id == "behind" {
				r.nc.SetReadDeadline(time.Now().Add(15 * time.Second)) // those ahead come before
			}
		}
		var lost []string
		for _, id := range append(ahead, "UP", "behind") {
			if answers[id] == nil {
				lost = append(lost, id)
			} else if answers[id]["result"] == nil {
				t.Errorf("header=%v: %s answered %v", header, id, answers[id])
			}
		}
		if len(lost) > 0 {
			t.Fatalf("header=%v: %d of %d calls never answered (%v)\n%s", header, len(lost), len(ahead)+2, lost[:min(len(lost), 10)],
				grepLines(d.Log.String(), "upgrade"))
		}
		if n := len(order); order[n-2] != "UP" || order[n-1] != "behind" {
			t.Fatalf("header=%v: answers out of order: ... %v; want every call ahead answered before the upgrade", header, order[max(0, n-4):])
		}
		if up, _ := answers["UP"]["result"].(map[string]any); up["toVersion"] != upgradeVersion {
			t.Fatalf("header=%v: the upgrade's answer %v", header, up)
		}
		evs := waitJournal(t, func() *rpc.Client { return d.Client(t) }, s.SessionID, "turn.completed", turnDone)
		if n := count(evs, event.TurnStarted); n != 1 {
			t.Fatalf("header=%v: %d turns started by one send", header, n)
		}
	}
}
