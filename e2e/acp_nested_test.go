package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestACPNestedDaemons: sessiond supervising sessiond over ACP. The outer
// daemon's provider "inner" is `sessiond acp` of a second daemon (protocol
// acp); a turn sent to the outer one runs in the inner one's echo and
// streams back through both.
func TestACPNestedDaemons(t *testing.T) {
	inner := daemontest.Start(t, daemontest.Options{})
	cfg := fmt.Sprintf("[providers.inner]\nprotocol = \"acp\"\ncommand = [%q, \"acp\", \"--socket\", %q, \"--provider\", \"echo\"]\n",
		daemontest.Binary(t), inner.Socket)
	outer := daemontest.Start(t, daemontest.Options{Config: cfg})
	ctx := context.Background()
	rec := newRecorder()
	oc, err := rpc.Dial(ctx, outer.Socket, rpc.ClientOptions{OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	var info api.SessionInfo
	if err := oc.Call(ctx, "agentSession.create", api.CreateParams{Provider: "inner", Cwd: t.TempDir()}, &info); err != nil {
		t.Fatal(err)
	}
	var a api.AttachResult
	if err := oc.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: info.SessionID}, &a); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := oc.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: info.SessionID, HolderID: "test"}, &h); err != nil {
		t.Fatalf("hold over the inner bridge: %v\n%s", err, outer.Log.String())
	}
	if err := oc.Call(ctx, "agentSession.send", api.SendParams{SessionID: info.SessionID, Text: "hello nested"}, nil); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for {
		var ev event.Event
		select {
		case ev = <-rec.ch:
		case <-time.After(60 * time.Second):
			t.Fatalf("no turn.completed within 60 s:\n%s", outer.Log.String())
		}
		if ev.Type == event.MessageDelta {
			var d event.DeltaData
			json.Unmarshal(ev.Data, &d)
			text.WriteString(d.Text)
		}
		if ev.Type == event.TurnCompleted {
			var d event.TurnCompletedData
			json.Unmarshal(ev.Data, &d)
			if d.Status != event.StatusCompleted || !strings.Contains(text.String(), "echo: hello nested") {
				t.Fatalf("nested turn: %+v, text %q", d, text.String())
			}
			break
		}
	}
	ic := inner.Client(t)
	all, err := ic.ListAll(ctx)
	if err != nil || len(all) != 1 || all[0].Provider != "echo" {
		t.Fatalf("the inner daemon's sessions: %v %v", all, err)
	}
}
