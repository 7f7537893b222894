package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ELegacyAttachIsAHold: a client without structured.hold.v1 gets a
// child from attach, and its disconnect ends that hold (ConnClosed): the
// session is evicted after idle_timeout, seen by a read-only observer.
func TestE2ELegacyAttachIsAHold(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"100ms\"\n"})
	events := make(chan event.Event, 256)
	obs, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{OnNotify: func(method string, p json.RawMessage) {
		var n api.EventNotice
		if method == rpc.NotifyEvent && json.Unmarshal(p, &n) == nil {
			events <- n.Event
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
	var oa api.AttachResult
	if err := obs.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID, AfterSeq: 1}, &oa); err != nil {
		t.Fatal(err)
	}
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("a read-only attach started a child: %v", pids)
	}
	for _, f := range framings {
		legacy := d.ClientFraming(t, f, api.CapAttach)
		var la api.AttachResult
		if err := legacy.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, &la); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, events, event.ProviderStarted)
		if la.Session.State != "live" && len(daemontest.TaggedProcesses(d.StateID)) == 0 {
			t.Fatalf("legacy attach did not start the provider: %+v", la.Session)
		}
		legacy.Close()
		waitEvent(t, events, event.LeaseReleased)
		if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
			t.Fatalf("%v: provider left after the legacy client went: %v", f, pids)
		}
	}
}

func waitEvent(t *testing.T, ch <-chan event.Event, typ string) event.Event {
	t.Helper()
	timeout := time.After(60 * time.Second) // a flood under the full suite's load
	for {
		select {
		case ev := <-ch:
			if ev.Type == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event", typ)
		}
	}
}
