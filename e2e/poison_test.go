package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EPoisonedSendLosesNothing: a client that sends a clientMessageId
// bbolt cannot store as a key, again and again while another session
// streams a flood through the same group commit, gets an error of its
// own; the flooding session keeps every delta (they add up to its
// message.completed), its turn completes, and the poisoned session still
// works.
func TestE2EPoisonedSendLosesNothing(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	turnDone := make(chan struct{}, 16)
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", OnNotify: func(method string, p json.RawMessage) {
		var n api.EventNotice
		if method == rpc.NotifyEvent && json.Unmarshal(p, &n) == nil && n.Event.Type == event.TurnCompleted {
			turnDone <- struct{}{}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids [2]string
	for i := range ids {
		var s api.SessionInfo
		if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
			t.Fatal(err)
		}
		ids[i] = s.SessionID
		if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "e2e"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	flood, target := ids[0], ids[1]
	var at api.AttachResult
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: flood}, &at); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: flood, Text: "/flood 20000 50"}, nil); err != nil {
		t.Fatal(err)
	}
	poison := strings.Repeat("k", 32769)
	poisoned, done := 0, false
	for ; !done && poisoned < 2000; poisoned++ {
		err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: target, Text: "x", ClientMessageID: poison}, nil)
		if err == nil {
			t.Fatal("a 32,769-byte clientMessageId was accepted")
		}
		if len(err.Error()) > 1024 {
			t.Fatalf("the error echoes the whole value (%d bytes)", len(err.Error()))
		}
		select {
		case <-turnDone:
			done = true
		default:
		}
	}
	t.Logf("poisoned sends during the flood: %d", poisoned)
	if !done {
		select {
		case <-turnDone:
		case <-ctx10(t).Done():
			t.Fatal("the flooding session's turn never completed")
		}
	}

	evs := readJournal(t, c, flood)
	var deltas strings.Builder
	var completed, status string
	for _, ev := range evs {
		var dd struct{ Text, Status string }
		json.Unmarshal(ev.Data, &dd)
		switch ev.Type {
		case event.MessageDelta:
			deltas.WriteString(dd.Text)
		case event.MessageCompleted:
			completed = dd.Text
		case event.TurnCompleted:
			status = dd.Status
		}
	}
	if status != "completed" || len(completed) != 20000*50 || deltas.String() != completed {
		t.Fatalf("flooding session: turn %q, message.completed %d bytes, deltas %d bytes (want 1000000 each)",
			status, len(completed), deltas.Len())
	}
	var r api.SendResult
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: target, Text: "still works", ClientMessageID: "m1"}, &r); err != nil {
		t.Fatalf("the poisoned session refuses a plain send afterwards: %v", err)
	}
}

// readJournal pages a session's whole journal.
func readJournal(t *testing.T, c *rpc.Client, id string) []event.Event {
	t.Helper()
	var all []event.Event
	for after := uint64(0); ; {
		var r api.ReadResult
		if err := c.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: id, AfterSeq: after, Limit: 4096}, &r); err != nil {
			t.Fatal(err)
		}
		all = append(all, r.Events...)
		if len(r.Events) == 0 || !r.HasMore {
			return all
		}
		after = r.Events[len(r.Events)-1].Seq
	}
}
