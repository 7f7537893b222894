package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EOutboundMinimumLoneReader: at the least max_outbound_bytes
// (1 MiB), a lone client that keeps reading gets every reply and
// notification whole, even one larger than the budget: the flood's
// message.completed (2.4 MB) as a notification while subscribed, then
// in an attach page. (Before: "connection is closed", logged
// outbound_budget with unwritten_bytes 2400305, one reply.)
func TestE2EOutboundMinimumLoneReader(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: fmt.Sprintf("max_outbound_bytes = %d\n", config.MinMaxOutboundBytes)})
	rec := newRecorder()
	lagged := make(chan api.LaggedNotice, 16)
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e-outmin", OnNotify: func(method string, p json.RawMessage) {
		var n api.LaggedNotice
		if method == rpc.NotifyLagged && json.Unmarshal(p, &n) == nil {
			lagged <- n
			return
		}
		rec.onNotify(method, p)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "/flood 300 8000"}, nil); err != nil {
		t.Fatal(err)
	}
	// The flood is 4.8 MB of notifications: a client slowed by a loaded
	// machine may fall 4 MiB behind and be detached (agentSession.lagged,
	// as the contract says); it then attaches again after what it got, as
	// a client does, and the rest comes whole.
	for done := false; !done; {
		select {
		case ev := <-rec.ch:
			done = ev.Type == event.TurnCompleted
		case n := <-lagged:
			t.Logf("lagged at seq %d: attaching again", n.LastDeliveredSeq)
			var ar api.AttachResult
			if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID, AfterSeq: n.LastDeliveredSeq}, &ar); err != nil {
				t.Fatal(err)
			}
			// The snapshot page may hold the turn's end already; later
			// pages (hasMore) come live.
			for _, ev := range ar.Events {
				done = done || ev.Type == event.TurnCompleted
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("no turn.completed of the flood within 2 min\n%s", d.Log.String())
		}
	}
	c2, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e-outmin-reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	var biggest int
	for after := uint64(0); ; {
		var ar api.ReadResult
		if err := c2.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: s.SessionID, AfterSeq: after}, &ar); err != nil {
			t.Fatalf("read after %d: %v\n%s", after, err, d.Log.String())
		}
		for _, e := range ar.Events {
			biggest = max(biggest, len(e.Data))
			after = e.Seq
		}
		if !ar.HasMore {
			break
		}
	}
	if biggest < 2_400_000 {
		t.Fatalf("the largest event read is %d bytes, want the flood's whole message (2.4 MB)", biggest)
	}
	if strings.Contains(d.Log.String(), `"reason":"outbound_budget"`) {
		t.Fatalf("a lone reader was closed for the budget:\n%s", d.Log.String())
	}
}
