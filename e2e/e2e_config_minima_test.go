package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// minimaConfig is every duration at the bottom of its range.
func minimaConfig() string {
	var top, ladder strings.Builder
	for _, r := range config.DurationRanges {
		if k, ok := strings.CutPrefix(r.Key, "ladder."); ok {
			fmt.Fprintf(&ladder, "%s = %q\n", k, r.Min.String())
		} else {
			fmt.Fprintf(&top, "%s = %q\n", r.Key, r.Min.String())
		}
	}
	return top.String() + "[ladder]\n" + ladder.String()
}

// TestE2EConfigMinima: with every duration at its minimum the daemon
// works: ctl connects and initializes, a session is held, runs a turn and
// closes with every eviction step ok, twice over. (With step_timeout =
// "1ms", the minimum before, every eviction failed and the session stayed
// evicting; initialize_timeout = "1ms" made ctl fail now and then.)
func TestE2EConfigMinima(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: minimaConfig()})
	dir := t.TempDir()
	for i := range 5 {
		if code, _, stderr := runCtl(t, d.Socket, dir, "ls"); code != 0 {
			t.Fatalf("ctl ls #%d: exit %d: %s\n%s", i, code, stderr, d.Log.String())
		}
	}
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e-minima", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: dir}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, nil); err != nil {
			t.Fatalf("hold #%d: %v\n%s", i, err, d.Log.String())
		}
		if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "hello"}, nil); err != nil {
			t.Fatalf("send #%d: %v", i, err)
		}
		waitEvent(t, rec.ch, event.TurnCompleted)
		var cr api.CloseResult
		if err := c.Call(ctx10(t), "agentSession.close", api.SessionParams{SessionID: s.SessionID}, &cr); err != nil {
			t.Fatalf("close #%d: %v\n%s", i, err, d.Log.String())
		}
		for _, st := range cr.Steps {
			if !st.OK {
				t.Fatalf("close #%d: step %s failed: %+v", i, st.Name, cr.Steps)
			}
		}
	}
}
