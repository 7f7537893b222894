package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EPipelinedBurst: against the real daemon and echo children, one
// connection writes 1,000 hold/release pairs on 50 sessions before reading
// any answer. Every release finds its hold (released:true: the pair ran in
// the order sent, even behind a hold that was starting the session's
// child), and afterwards no session has a holder left.
func TestE2EPipelinedBurst(t *testing.T) {
	const pairs, sessions = 1000, 50
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"10m\"\n"})
	c := d.Client(t)
	ids := make([]string, sessions)
	for i := range ids {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
			t.Fatal(err)
		}
		ids[i] = s.SessionID
	}
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.structured.hold.v1","agent-session.close.v1"]}}` + "\n")
	for i := range pairs {
		p := fmt.Sprintf(`{"sessionId":%q,"holderId":"h%d"}`, ids[i%sessions], i)
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"agentSession.hold","params":%s}`+"\n", 2*i+1, p)
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"agentSession.release","params":%s}`+"\n", 2*i+2, p)
	}
	nc, err := net.Dial("unix", d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	werr := make(chan error, 1)
	go func() { _, err := nc.Write([]byte(b.String())); werr <- err }()
	br := bufio.NewReaderSize(nc, 1<<20)
	for range 2*pairs + 1 {
		nc.SetReadDeadline(time.Now().Add(60 * time.Second))
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			ID     int
			Result map[string]any
			Error  any
		}
		if err := json.Unmarshal(line, &m); err != nil || m.Result == nil {
			t.Fatalf("answer %s: %v", line, err)
		}
		if m.ID > 0 && m.ID%2 == 0 && m.Result["released"] != true {
			t.Fatalf("release %d answered %s, want released:true", m.ID, line)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Holders) != 0 {
			t.Fatalf("%s still held by %v", id, s.Holders)
		}
	}
}
