package e2e

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// recorder collects a client's agentSession.event notifications.
type recorder struct {
	mu  sync.Mutex
	evs []event.Event
	ch  chan event.Event
}

func newRecorder() *recorder { return &recorder{ch: make(chan event.Event, 4096)} }

func (r *recorder) onNotify(method string, p json.RawMessage) {
	var n api.EventNotice
	if method != rpc.NotifyEvent || json.Unmarshal(p, &n) != nil {
		return
	}
	r.mu.Lock()
	r.evs = append(r.evs, n.Event)
	r.mu.Unlock()
	r.ch <- n.Event
}

// TestE2EHoldSendReleaseEvict drives a whole session life over the real
// socket: attach (snapshot, then live without gap or duplicate), hold,
// send with de-duplication, release, idle eviction with the journal tail,
// and a re-hold that resumes the thread at a higher fence.
func TestE2EHoldSendReleaseEvict(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{Config: "idle_timeout = \"200ms\"\n"})
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	var at api.AttachResult
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, &at); err != nil {
		t.Fatal(err)
	}
	var h1 api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "desktop:w1"}, &h1); err != nil {
		t.Fatal(err)
	}
	if h1.State != "live" || h1.PID == 0 || h1.Fence != 1 {
		t.Fatalf("hold %+v", h1)
	}
	var s1, s2 api.SendResult
	send := api.SendParams{SessionID: s.SessionID, Text: "hi", ClientMessageID: "m1"}
	if err := c.Call(ctx10(t), "agentSession.send", send, &s1); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", send, &s2); err != nil || !s2.Duplicate || s2.TurnID != s1.TurnID {
		t.Fatalf("retried send %+v %v", s2, err)
	}
	waitEvent(t, rec.ch, event.TurnCompleted)
	var rel api.ReleaseResult
	if err := c.Call(ctx10(t), "agentSession.release", api.ReleaseParams{SessionID: s.SessionID, HolderID: "desktop:w1", HoldToken: h1.HoldToken}, &rel); err != nil || !rel.Released || rel.ReleaseAt == nil {
		t.Fatalf("release %+v %v", rel, err)
	}
	waitEvent(t, rec.ch, event.LeaseReleased)
	if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
		t.Fatalf("provider left after idle eviction: %v", pids)
	}

	// Snapshot + live feed = the journal, without gap or duplicate.
	var rd api.ReadResult
	if err := c.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: s.SessionID, AfterSeq: 0, Limit: 4096}, &rd); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	seen := append(append([]event.Event{}, at.Events...), rec.evs...)
	rec.mu.Unlock()
	if len(seen) != len(rd.Events) {
		t.Fatalf("client saw %d events, journal has %d", len(seen), len(rd.Events))
	}
	for i := range seen {
		if seen[i].Seq != uint64(i+1) || seen[i].Type != rd.Events[i].Type {
			t.Fatalf("event %d: saw seq %d %s, journal %d %s", i, seen[i].Seq, seen[i].Type, rd.Events[i].Seq, rd.Events[i].Type)
		}
	}
	n := len(rd.Events)
	want := []string{event.ProviderExited, event.SessionEnded, event.LeaseReleased}
	for i, typ := range want {
		if got := rd.Events[n-len(want)+i].Type; got != typ {
			t.Fatalf("journal tail %d is %s, want %s", i, got, typ)
		}
	}

	var h2 api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "desktop:w1"}, &h2); err != nil {
		t.Fatal(err)
	}
	if h2.ThreadID != h1.ThreadID || h2.Fence <= h1.Fence {
		t.Fatalf("re-hold %+v after %+v", h2, h1)
	}
	var cr api.CloseResult
	if err := c.Call(ctx10(t), "agentSession.close", api.SessionParams{SessionID: s.SessionID}, &cr); err != nil || len(cr.Steps) != 6 {
		t.Fatalf("close %+v %v", cr, err)
	}
	for i, name := range []string{"stop-provider-child", "drain-published", "close-sink", "discard-sink", "release-lease", "forget-session"} {
		if cr.Steps[i].Name != name || !cr.Steps[i].OK {
			t.Fatalf("step %d: %+v, want %s ok", i, cr.Steps[i], name)
		}
	}
}
