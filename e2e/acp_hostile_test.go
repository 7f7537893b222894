package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestACPAgentAfterItsTurn: an agent answering its prompt with a 1 MB
// stopReason, then asking a permission with no turn running
// (testdata/acp/lateperm.sh), against the real daemon: turn.completed
// keeps the stopReason as a name (at most 128 bytes); the permission is
// refused (approval.resolved deny by the daemon, never approval.requested),
// so nothing is pending: once the hold is released the idle clock evicts
// the session and the agent is stopped.
func TestACPAgentAfterItsTurn(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("testdata", "acp", "lateperm.sh"))
	if err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"1s\"\n[providers.late]\nprotocol = \"acp\"\ncommand = [\"sh\", \"" + script + "\"]\n"})
	c := d.Client(t)
	ctx := context.Background()
	var info api.SessionInfo
	if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: "late", Cwd: t.TempDir()}, &info); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: info.SessionID, HolderID: "h"}, nil); err != nil {
		t.Fatal(err)
	}
	_, rec := follow(t, d.Socket, info.SessionID)
	if err := c.Call(ctx, "agentSession.send", api.SendParams{SessionID: info.SessionID, Text: "go"}, nil); err != nil {
		t.Fatal(err)
	}
	var tc event.TurnCompletedData
	json.Unmarshal(acpWaitEvent(t, rec, event.TurnCompleted).Data, &tc)
	if len(tc.StopReason) > 128 || tc.Status != event.StatusFailed {
		t.Fatalf("turn.completed: status %s, stopReason of %d bytes", tc.Status, len(tc.StopReason))
	}
	for {
		ev := <-rec.ch
		if ev.Type == event.ApprovalRequested {
			t.Fatalf("a permission with no turn running was relayed: %s", ev.Data)
		}
		if ev.Type == event.ApprovalResolved {
			var r event.ApprovalResolvedData
			json.Unmarshal(ev.Data, &r)
			if r.By != "daemon" || r.Decision != "deny" {
				t.Fatalf("resolved %+v", r)
			}
			break
		}
	}
	if err := c.Call(ctx, "agentSession.release", api.ReleaseParams{SessionID: info.SessionID, HolderID: "h"}, nil); err != nil {
		t.Fatal(err)
	}
	acpWaitEvent(t, rec, event.SessionEnded)
	acpWaitEvent(t, rec, event.LeaseReleased)
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("left running after the eviction: %v", pids)
	}
}
