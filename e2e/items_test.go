package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// dialCaps dials with the given capabilities and records notifications.
func dialCaps(t *testing.T, d *daemontest.Daemon, caps []string) (*rpc.Client, *recorder) {
	t.Helper()
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e", Capabilities: caps, OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rec
}

func without(caps []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return slices.Contains(drop, c) })
}

func decodeData[T any](t *testing.T, ev event.Event) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		t.Fatalf("%s data %s: %v", ev.Type, ev.Data, err)
	}
	return v
}

// TestE2EItemsOnlyWithCapability: echo's /work turn journals item events;
// a connection with agent-session.items.v1 sees them, one without never
// does — not in notifications, attach snapshots or read pages — and its
// seqs skip where they stand. Approvals v2: options checked, answers
// refused twice, v2 decisions refused to a v1 client.
func TestE2EItemsOnlyWithCapability(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	full, frec := dialCaps(t, d, rpc.Capabilities)
	old, orec := dialCaps(t, d, without(rpc.Capabilities, api.CapItems, api.CapApprovalsV2))
	var s api.SessionInfo
	if err := full.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*rpc.Client{full, old} {
		var at api.AttachResult
		if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, &at); err != nil {
			t.Fatal(err)
		}
	}
	if err := full.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "h"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := full.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "/work 3"}, nil); err != nil {
		t.Fatal(err)
	}
	req := decodeData[event.ApprovalRequestedData](t, waitEvent(t, orec.ch, event.ApprovalRequested))
	if req.Kind != "command" || req.ItemID == "" || len(req.Options) != 4 {
		t.Fatalf("approval.requested %+v", req)
	}
	// A v1 client may only approve or deny.
	err := old.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: s.SessionID, RequestID: req.RequestID, Decision: "approveForSession"}, nil)
	if !errors.Is(err, &rpc.Error{Reason: "invalid_params"}) {
		t.Fatalf("v1 approveForSession: %v", err)
	}
	if err := full.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: s.SessionID, RequestID: req.RequestID, Decision: "approveForSession"}, nil); err != nil {
		t.Fatal(err)
	}
	err = old.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: s.SessionID, RequestID: req.RequestID, Decision: "approve"}, nil)
	if !errors.Is(err, &rpc.Error{Reason: "request_not_found"}) {
		t.Fatalf("answered twice: %v", err)
	}
	waitEvent(t, frec.ch, event.TurnCompleted)
	waitEvent(t, orec.ch, event.TurnCompleted)

	// /ask: a decision outside the request's options names the allowed ones.
	if err := full.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "/ask"}, nil); err != nil {
		t.Fatal(err)
	}
	ask := decodeData[event.ApprovalRequestedData](t, waitEvent(t, frec.ch, event.ApprovalRequested))
	err = full.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: s.SessionID, RequestID: ask.RequestID, Decision: "cancel"}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Reason != "invalid_params" || fmt.Sprint(re.Data["allowed"]) != "[approve deny]" {
		t.Fatalf("decision outside options: %v %+v", err, re)
	}
	if err := full.Call(ctx10(t), "agentSession.respond", api.RespondParams{SessionID: s.SessionID, RequestID: ask.RequestID,
		Decision: "approve", Answers: map[string][]string{"q1": {"bye"}}}, nil); err != nil {
		t.Fatal(err)
	}
	msg := decodeData[event.DeltaData](t, waitEvent(t, frec.ch, event.MessageCompleted))
	if msg.Text != "echo: /ask (answer: bye)" {
		t.Fatalf("message.completed %+v", msg)
	}
	waitEvent(t, frec.ch, event.TurnCompleted)
	waitEvent(t, orec.ch, event.TurnCompleted)

	var fr, or api.ReadResult
	if err := full.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: s.SessionID, Limit: 4096}, &fr); err != nil {
		t.Fatal(err)
	}
	if err := old.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: s.SessionID, Limit: 4096}, &or); err != nil {
		t.Fatal(err)
	}
	if fr.LastSeq != or.LastSeq || fr.HasMore != or.HasMore {
		t.Fatalf("read cursors differ: %d/%v vs %d/%v", fr.LastSeq, fr.HasMore, or.LastSeq, or.HasMore)
	}
	var want []uint64
	kinds := map[string]bool{}
	for i, ev := range fr.Events {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("full journal not gapless at %d: seq %d", i, ev.Seq)
		}
		if event.ItemsV1(ev.Type) {
			kinds[ev.Type] = true
			continue
		}
		want = append(want, ev.Seq)
	}
	for _, typ := range []string{event.ItemStarted, event.ItemDelta, event.ItemCompleted, event.TurnPlan, event.TurnDiff, event.TurnUsage} {
		if !kinds[typ] {
			t.Errorf("journal has no %s", typ)
		}
	}
	seqs := func(evs []event.Event) []uint64 {
		var out []uint64
		for _, ev := range evs {
			out = append(out, ev.Seq)
		}
		return out
	}
	if got := seqs(or.Events); !slices.Equal(got, want) {
		t.Fatalf("old client's read page %v, want %v", got, want)
	}
	orec.mu.Lock()
	got := seqs(orec.evs)
	orec.mu.Unlock()
	if len(got) == 0 || len(got) > len(want) || !slices.Equal(got, want[len(want)-len(got):]) {
		t.Fatalf("old client's notifications %v, want a tail of %v", got, want)
	}
	// A late attach of the old client: its snapshot hides items too.
	var at api.AttachResult
	if err := old.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID, Limit: 4096}, &at); err != nil {
		t.Fatal(err)
	}
	if got := seqs(at.Events); !slices.Equal(got, want) {
		t.Fatalf("old client's attach snapshot %v, want %v", got, want)
	}
}

// TestE2EApprovalCancelledAtChildExit: a child killed while its approval
// is open: the journal closes the approval (cancel, by the daemon) before
// the turn's interrupted turn.completed.
func TestE2EApprovalCancelledAtChildExit(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	c, rec := dialCaps(t, d, rpc.Capabilities)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "h"}, &h); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: "/work"}, nil); err != nil {
		t.Fatal(err)
	}
	req := decodeData[event.ApprovalRequestedData](t, waitEvent(t, rec.ch, event.ApprovalRequested))
	if err := syscall.Kill(h.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := waitEvent(t, rec.ch, event.ApprovalResolved)
	done := waitEvent(t, rec.ch, event.TurnCompleted)
	got := decodeData[event.ApprovalResolvedData](t, res)
	if got != (event.ApprovalResolvedData{RequestID: req.RequestID, Decision: "cancel", By: "daemon", Reason: "provider_exited"}) || res.Seq > done.Seq {
		t.Fatalf("approval.resolved %+v at %d, turn.completed at %d", got, res.Seq, done.Seq)
	}
	if tc := decodeData[event.TurnCompletedData](t, done); tc.Status != "interrupted" || tc.Reason != "provider_exited" {
		t.Fatalf("turn.completed %+v", tc)
	}
}

// TestE2EApprovalCancelledAtRestart: the daemon dies (SIGKILL) with an
// approval open; the next start's reap journals its cancel before the
// turn's daemon_restart turn.completed.
func TestE2EApprovalCancelledAtRestart(t *testing.T) {
	req, rd := killAtApproval(t, "/approve")
	var types []string
	for _, ev := range rd.Events {
		types = append(types, ev.Type)
	}
	i := slices.Index(types, event.ApprovalResolved)
	if i < 0 || i+1 >= len(types) || types[i+1] != event.TurnCompleted {
		t.Fatalf("journal %v: want approval.resolved right before turn.completed", types)
	}
	got := decodeData[event.ApprovalResolvedData](t, rd.Events[i])
	if got != (event.ApprovalResolvedData{RequestID: req.RequestID, Decision: "cancel", By: "daemon", Reason: "daemon_restart"}) {
		t.Fatalf("approval.resolved %+v", got)
	}
}

// TestE2EItemsInterruptedAtRestart: the daemon dies (SIGKILL) in a /work
// turn whose command item is open (waiting for its approval); the next
// start journals item.completed {interrupted} for that item (and only
// it: the reasoning item had completed) after the approval's cancel and
// before the turn's daemon_restart turn.completed.
func TestE2EItemsInterruptedAtRestart(t *testing.T) {
	req, rd := killAtApproval(t, "/work")
	var tail []string
	var interrupted []event.ItemData
	for _, ev := range rd.Events {
		if ev.Type == event.ItemCompleted {
			if d := decodeData[event.ItemData](t, ev); d.Status == event.ItemInterruptedStatus {
				interrupted = append(interrupted, d)
			}
		}
		tail = append(tail, ev.Type)
	}
	i := slices.Index(tail, event.ApprovalResolved)
	if i < 0 || i+2 >= len(tail) || tail[i+1] != event.ItemCompleted || tail[i+2] != event.TurnCompleted {
		t.Fatalf("journal %v: want approval.resolved, item.completed, turn.completed", tail)
	}
	if len(interrupted) != 1 || interrupted[0].ItemID != req.ItemID || interrupted[0].Kind != event.KindCommandExecution {
		t.Fatalf("interrupted items %+v, want only the command %s", interrupted, req.ItemID)
	}
}

// killAtApproval sends text to a held echo session, SIGKILLs the daemon
// once the turn asks for an approval, restarts it on the same state dir
// and returns the approval request and the session's journal as read then.
func killAtApproval(t *testing.T, text string) (event.ApprovalRequestedData, api.ReadResult) {
	t.Helper()
	d := daemontest.Start(t, daemontest.Options{})
	c, rec := dialCaps(t, d, rpc.Capabilities)
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "h"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: text}, nil); err != nil {
		t.Fatal(err)
	}
	req := decodeData[event.ApprovalRequestedData](t, waitEvent(t, rec.ch, event.ApprovalRequested))
	d.Kill()
	<-d.Exited()
	d2 := daemontest.Start(t, daemontest.Options{StateDir: d.StateDir})
	c2, _ := dialCaps(t, d2, rpc.Capabilities)
	var rd api.ReadResult
	if err := c2.Call(ctx10(t), "agentSession.read", api.ReadParams{SessionID: s.SessionID, Limit: 4096}, &rd); err != nil {
		t.Fatal(err)
	}
	return req, rd
}
