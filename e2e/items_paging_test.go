package e2e

import (
	"slices"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EFilteredPagingProgresses: a client without items.v1 that pages
// by the last event it got never gets an empty page while more follows
// (a run of item events longer than its limit used to answer events:[]
// with hasMore:true, and the client had no cursor to go on): read and
// attach alike reach exactly the events it sees.
func TestE2EFilteredPagingProgresses(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	full, frec := dialCaps(t, d, rpc.Capabilities)
	old, _ := dialCaps(t, d, without(rpc.Capabilities, api.CapItems, api.CapApprovalsV2))
	var s api.SessionInfo
	if err := full.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	var at api.AttachResult
	if err := full.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, &at); err != nil {
		t.Fatal(err)
	}
	if err := full.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "h"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := full.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "/work 3"}, nil); err != nil {
		t.Fatal(err)
	}
	req := decodeData[event.ApprovalRequestedData](t, waitEvent(t, frec.ch, event.ApprovalRequested))
	if err := full.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: s.SessionID, RequestID: req.RequestID, Decision: "approve"}, nil); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, frec.ch, event.TurnCompleted)

	var want []uint64
	for _, ev := range readJournal(t, full, s.SessionID) {
		if !event.ItemsV1(ev.Type) {
			want = append(want, ev.Seq)
		}
	}
	page := func(method string, after uint64) ([]event.Event, bool) {
		if method == "agentSession.attach" {
			var r api.AttachResult
			if err := old.Call(ctx10(t), method, api.AttachParams{SessionID: s.SessionID, AfterSeq: after, Limit: 2}, &r); err != nil {
				t.Fatal(err)
			}
			return r.Events, r.HasMore
		}
		var r api.ReadResult
		if err := old.Call(ctx10(t), method, api.ReadParams{SessionID: s.SessionID, AfterSeq: after, Limit: 2}, &r); err != nil {
			t.Fatal(err)
		}
		return r.Events, r.HasMore
	}
	for _, method := range []string{"agentSession.read", "agentSession.attach"} {
		var got []uint64
		after := uint64(0)
		for i := 0; ; i++ {
			evs, more := page(method, after)
			if len(evs) == 0 && more {
				t.Fatalf("%s after %d: an empty page with hasMore", method, after)
			}
			for _, ev := range evs {
				got = append(got, ev.Seq)
			}
			if !more || i > 1000 {
				break
			}
			after = evs[len(evs)-1].Seq
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s paged %v, want %v", method, got, want)
		}
	}
}
