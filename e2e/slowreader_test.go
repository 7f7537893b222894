package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EStalledReaderClosed: a client that holds a session, attaches,
// floods itself with output and stops reading is closed after
// write_timeout; its hold ends through the backstop and the session is
// evicted, while an observer keeps being served.
func TestE2EStalledReaderClosed(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"100ms\"\nwrite_timeout = \"2s\"\n"})
	events := make(chan event.Event, 100000)
	obs, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{OnNotify: func(method string, p json.RawMessage) {
		var n api.EventNotice
		if method == rpc.NotifyEvent && json.Unmarshal(p, &n) == nil {
			select {
			case events <- n.Event:
			default:
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	var s api.SessionInfo
	if err := obs.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := obs.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID, AfterSeq: 1}, nil); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, d.Socket, true)
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.attach.v1","agent-session.structured.hold.v1","agent-session.turns.v1"]}}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"agentSession.hold","params":{"sessionId":%q,"holderId":"stalled"}}`, s.SessionID),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"agentSession.attach","params":{"sessionId":%q,"afterSeq":1}}`, s.SessionID),
	}
	for _, m := range msgs {
		r.send(m)
		if resp := r.recv(); resp["result"] == nil {
			t.Fatalf("%s: %v", m, resp)
		}
	}
	// Ask for a flood and never read again.
	r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"agentSession.send","params":{"sessionId":%q,"text":"/flood 500 4096"}}`, s.SessionID))
	waitEvent(t, events, event.LeaseReleased)
	if !strings.Contains(d.Log.String(), `"reason":"write_timeout"`) {
		t.Fatalf("no write_timeout closing logged:\n%s", d.Log.String())
	}
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("provider left after the stalled client was closed: %v", pids)
	}
	var st rpc.Status
	if err := obs.Call(ctx10(t), "daemon.status", nil, &st); err != nil {
		t.Fatalf("observer not served: %v", err)
	}
}
