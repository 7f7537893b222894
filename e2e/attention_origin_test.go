package e2e

import (
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EOriginNotSpoofable: an `origin` a client puts in send's or
// respond's params is ignored; the journal records the connection's own.
func TestE2EOriginNotSpoofable(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	a := heldSession(t, c.Client, "o")
	spoof := map[string]any{"client": "evil", "connectionId": "c-999", "device": "phone:spoof"}
	if err := c.Call(ctx10(t), "agentSession.send", map[string]any{"sessionId": a, "text": "/approve", "origin": spoof}, nil); err != nil {
		t.Fatal(err)
	}
	c.next(t, a, api.AttentionApprovalRequested)
	req := decodeData[event.ApprovalRequestedData](t, journaled(t, c.Client, a, event.ApprovalRequested)[0])
	if err := c.Call(ctx10(t), "agentSession.respond", map[string]any{"sessionId": a, "requestId": req.RequestID, "decision": "approve", "origin": spoof}, nil); err != nil {
		t.Fatal(err)
	}
	c.next(t, a, api.AttentionTurnCompleted)
	want := event.Origin{Client: "desktop", ConnectionID: c.Init.ConnectionID}
	if st := decodeData[event.TurnStartedData](t, journaled(t, c.Client, a, event.TurnStarted)[0]); st.Origin == nil || *st.Origin != want {
		t.Fatalf("turn.started origin %+v, want %+v", st.Origin, want)
	}
	if res := decodeData[event.ApprovalResolvedData](t, journaled(t, c.Client, a, event.ApprovalResolved)[0]); res.Origin == nil || *res.Origin != want {
		t.Fatalf("approval.resolved origin %+v, want %+v", res.Origin, want)
	}
}

// TestE2EKeepAwakeCancel: a turn the user cancels releases the inhibitor
// (and, by design, tells nobody: the user ended it).
func TestE2EKeepAwakeCancel(t *testing.T) {
	d, l := keepAwakeDaemon(t, "")
	c := dialAttn(t, d, "desktop", "", rpc.Capabilities)
	a := heldSession(t, c.Client, "c")
	sendTurn(t, c.Client, a, "/approve")
	c.next(t, a, api.AttentionApprovalRequested)
	in := l.Next(t)
	if err := c.Call(ctx10(t), "agentSession.cancel", api.SessionParams{SessionID: a}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-in.Released():
	case <-time.After(30 * time.Second):
		t.Fatal("inhibitor still held 30 s after the only turn was cancelled")
	}
	if n := l.Calls(); n != 1 {
		t.Fatalf("%d Inhibit calls", n)
	}
}
