package acp

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// waitApproval starts a turn and returns its approval.requested.
func (g *agent) waitApproval(t *testing.T, text string) event.ApprovalRequestedData {
	t.Helper()
	if err := g.a.StartTurn(t.Context(), "t_1", text); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.ApprovalRequested)
	return data[event.ApprovalRequestedData](t, evs[len(evs)-1])
}

// answerOf is what the agent said it got (its outcome=… text).
func answerOf(t *testing.T, evs []event.Draft) string {
	t.Helper()
	var text string
	for _, d := range of(evs, event.MessageDelta) {
		text += data[event.DeltaData](t, d).Text
	}
	return text
}

// A permission request becomes approval.requested {kind from the tool
// call's kind, the decisions its options allow, cancel}; each decision
// selects the option of its kind.
func TestPermissionDecisions(t *testing.T) {
	for _, c := range []struct{ decision, outcome, item string }{
		{provider.DecisionApprove, "outcome=yes", event.ItemCompletedStatus},
		{provider.DecisionApproveForSession, "outcome=always", event.ItemCompletedStatus},
		{provider.DecisionDeny, "outcome=no", event.ItemDeclinedStatus},
	} {
		g := startAgent(t, "", nil)
		g.start(t)
		ap := g.waitApproval(t, "work")
		if ap.Kind != "command" || ap.ItemID != "call-1" || ap.RequestID != "f1-1" ||
			!slices.Equal(ap.Options, []string{"approve", "approveForSession", "deny", "cancel"}) {
			t.Fatalf("approval.requested = %+v", ap)
		}
		if err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: c.decision}); err != nil {
			t.Fatal(err)
		}
		evs := g.until(t, event.TurnCompleted)
		if got := answerOf(t, evs); got != c.outcome {
			t.Fatalf("%s: agent got %q", c.decision, got)
		}
		if r := of(evs, event.ApprovalResolved); len(r) != 1 || data[event.ApprovalResolvedData](t, r[0]).Decision != c.decision {
			t.Fatalf("%s: resolved %v", c.decision, r)
		}
		items := of(evs, event.ItemCompleted)
		last := data[event.ItemData](t, items[len(items)-1])
		if last.ItemID != "call-1" || last.Status != c.item {
			t.Fatalf("%s: item %+v", c.decision, last)
		}
		if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusCompleted {
			t.Fatalf("%s: %+v", c.decision, tc)
		}
	}
}

// A decision the request does not offer is refused naming the allowed
// ones, and the request stays answerable.
func TestPermissionDecisionNotOffered(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	ap := g.waitApproval(t, "work")
	err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "maybe"})
	var de *provider.DecisionError
	if !errors.As(err, &de) || !slices.Contains(de.Allowed, "approve") {
		t.Fatalf("respond maybe: %v", err)
	}
	if err := g.a.Respond(t.Context(), "f1-99", provider.Answer{Decision: "approve"}); !errors.Is(err, provider.ErrRequestNotFound) {
		t.Fatalf("respond to nothing: %v", err)
	}
	if err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.TurnCompleted)
}

// The agent ending the turn cancelled after a denial: interrupted
// (approval_denied).
func TestDenialEndsTurn(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	ap := g.waitApproval(t, "deny-ends")
	if err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.TurnCompleted)
	if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonApprovalDenied || tc.StopReason != "cancelled" {
		t.Fatalf("turn.completed = %+v", tc)
	}
}

// Cancel while a permission is pending: session/cancel, the permission is
// answered {outcome:"cancelled"} (never selected), journaled resolved
// cancel by the daemon; the turn ends interrupted (user_cancel); a later
// answer finds no request.
func TestCancelWhilePermissionPending(t *testing.T) {
	for _, how := range []string{"interrupt", "respond-cancel"} {
		g := startAgent(t, "", nil)
		g.start(t)
		ap := g.waitApproval(t, "work")
		if how == "interrupt" {
			if ok, err := g.a.Interrupt(t.Context()); !ok || err != nil {
				t.Fatalf("interrupt: %v %v", ok, err)
			}
		} else if err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "cancel"}); err != nil {
			t.Fatal(err)
		}
		err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "approve"})
		evs := g.until(t, event.TurnCompleted)
		if !errors.Is(err, provider.ErrRequestNotFound) {
			t.Fatalf("%s: an answer after cancel: %v", how, err)
		}
		if got := answerOf(t, evs); got != "outcome=cancelled" {
			t.Fatalf("%s: agent got %q", how, got)
		}
		r := of(evs, event.ApprovalResolved)
		if len(r) != 1 || data[event.ApprovalResolvedData](t, r[0]).Decision != "cancel" {
			t.Fatalf("%s: resolved %v", how, r)
		}
		if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel {
			t.Fatalf("%s: turn.completed = %+v", how, tc)
		}
		if len(g.sentMethod("session/cancel")) != 1 {
			t.Fatalf("%s: session/cancel sent %d times", how, len(g.sentMethod("session/cancel")))
		}
		for _, m := range g.sentLines() {
			if res, ok := m["result"].(map[string]any); ok {
				if o, _ := res["outcome"].(map[string]any); o["outcome"] == "selected" {
					t.Fatalf("%s: a permission was answered selected after cancel: %v", how, m)
				}
			}
		}
	}
}

// A permission request with no option the daemon can choose (none, or
// only unknown kinds or empty ids), with one optionId for two options, or
// for another session, is refused at
// once with invalid params naming why, journaled resolved deny by the
// daemon; the turn goes on.
func TestBadPermissionRequests(t *testing.T) {
	for _, c := range []struct{ mode, why string }{
		{"noopts", "offers no option"}, {"badopts", "offers no option"}, {"othersession", `names session "other"`},
		{"permcollide", `repeats optionId "same"`},
	} {
		g := startAgent(t, "", nil)
		g.lax = c.mode == "badopts" // an option kind the schema does not have
		g.start(t)
		evs := g.turn(t, "t_1", c.mode)
		if got := answerOf(t, evs); got != "answer=-32602" {
			t.Fatalf("%s: agent got %q", c.mode, got)
		}
		r := of(evs, event.ApprovalResolved)
		if len(r) != 1 || len(of(evs, event.ApprovalRequested)) != 0 {
			t.Fatalf("%s: %s", c.mode, types(evs))
		}
		if rd := data[event.ApprovalResolvedData](t, r[0]); rd.Decision != "deny" || rd.By != "daemon" || !strings.Contains(rd.Reason, c.why) {
			t.Fatalf("%s: resolved %+v", c.mode, rd)
		}
		if !strings.Contains(g.log(), "permission_refused") {
			t.Fatalf("%s: not logged", c.mode)
		}
	}
}

// An answer and a cancel racing: the agent sees either the selected
// answer before session/cancel, or only cancelled; never selected after
// session/cancel.
func TestAnswerRacingCancel(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	for i := range 40 {
		turn := "t_" + string(rune('A'+i))
		if err := g.a.StartTurn(t.Context(), turn, "work"); err != nil {
			t.Fatal(err)
		}
		evs := g.until(t, event.ApprovalRequested)
		ap := data[event.ApprovalRequestedData](t, evs[len(evs)-1])
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "approve"})
		}()
		if _, err := g.a.Interrupt(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-done
		evs = g.until(t, event.TurnCompleted)
		if got := answerOf(t, evs); strings.Contains(got, "SELECTED-AFTER-CANCEL") {
			t.Fatalf("round %d: the agent got a selected answer after session/cancel", i)
		}
	}
}

// After our cancel and the prompt's answer, a permission the agent still
// asks is answered cancelled at once (never relayed without a turn).
func TestPermissionAfterCancelledTurn(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "cancelstream"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.TurnCompleted)
	timeout := time.After(20 * time.Second)
	for {
		for _, m := range g.sentLines() {
			if res, ok := m["result"].(map[string]any); ok && m["id"] != nil {
				if o, _ := res["outcome"].(map[string]any); o["outcome"] == "cancelled" {
					return
				}
			}
		}
		select {
		case <-g.wrote:
		case d := <-g.evs:
			if d.Type == event.ApprovalRequested {
				t.Fatalf("the late permission was relayed: %s", d.Data)
			}
		case <-timeout:
			t.Fatalf("the late permission was not answered cancelled\nlog:\n%s", g.log())
		}
	}
}

// A permission asked during session/load names the session being loaded:
// relayed, not refused as another session's.
func TestPermissionDuringLoad(t *testing.T) {
	g := startAgent(t, "", func(o *provider.Options, _ *Profile) { o.ThreadID = "asks" })
	g.start(t)
	evs := g.until(t, event.ApprovalRequested)
	if r := of(evs, event.ApprovalResolved); len(r) != 0 {
		t.Fatalf("refused: %s", r[0].Data)
	}
	if ap := data[event.ApprovalRequestedData](t, evs[len(evs)-1]); ap.ItemID != "load-1" {
		t.Fatalf("approval.requested %+v", ap)
	}
}

// Permission requests waiting for an answer are bounded: past
// maxOpenApprovals one is refused (-32602, resolved deny by the daemon).
func TestPermissionFlood(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", fmt.Sprintf("permflood %d", maxOpenApprovals+10)); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.MessageDelta)
	refused := 0
	for _, d := range of(evs, event.ApprovalResolved) {
		if rd := data[event.ApprovalResolvedData](t, d); rd.By == "daemon" && strings.Contains(rd.Reason, "are open already") {
			refused++
		}
	}
	if n := len(of(evs, event.ApprovalRequested)); n != maxOpenApprovals || refused != 10 {
		t.Fatalf("%d relayed, %d refused", n, refused)
	}
	if _, err := g.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.TurnCompleted)
}

// The open permission requests are bounded in bytes too: requests of
// about 4 KB (1000-byte ids and optionIds) are refused past
// maxApprovalBytes, long before maxOpenApprovals, naming the bytes and
// the limit; an optionId over maxOptionIDBytes is refused naming both.
// What is counted is what is held, and a cancel gives it all back.
func TestPermissionBytes(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "permbytes 400"); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.MessageDelta)
	heavy, long := 0, 0
	for _, d := range of(evs, event.ApprovalResolved) {
		rd := data[event.ApprovalResolvedData](t, d)
		switch {
		case rd.By == "daemon" && strings.Contains(rd.Reason, fmt.Sprintf("bytes already (max %d)", maxApprovalBytes)):
			heavy++
		case rd.By == "daemon" && strings.Contains(rd.Reason, "an optionId of 2000 bytes is over 1024 bytes"):
			long++
		}
	}
	relayed := len(of(evs, event.ApprovalRequested))
	if long != 1 || heavy == 0 || relayed+heavy+long != 400 || relayed >= maxOpenApprovals {
		t.Fatalf("%d relayed, %d refused for their bytes, %d for a long optionId", relayed, heavy, long)
	}
	g.a.mu.Lock()
	held, sum := g.a.approvalBytes, 0
	for k, ap := range g.a.approvals {
		sum += ap.size() + len(k)
	}
	g.a.mu.Unlock()
	if held != sum || held > maxApprovalBytes {
		t.Fatalf("counted %d bytes, held %d (max %d)", held, sum, maxApprovalBytes)
	}
	if _, err := g.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.until(t, event.TurnCompleted)
	g.a.mu.Lock()
	defer g.a.mu.Unlock()
	if g.a.approvalBytes != 0 || len(g.a.approvals) != 0 {
		t.Fatalf("after the cancel %d bytes counted, %d open", g.a.approvalBytes, len(g.a.approvals))
	}
}

// Ids reused: a permission request whose id is open already is refused
// with a notice and not answered (an answer would carry the open one's id:
// the agent would take it for the open request's), and the open one stays
// answerable, answered once; an answer to no request of ours and a second answer to the
// prompt are logged anomalies; the next turn runs as usual.
func TestReusedIDs(t *testing.T) {
	g := startAgent(t, "", nil)
	g.lax = true // a response to no request
	g.start(t)
	if err := g.a.StartTurn(t.Context(), "t_1", "reuse"); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.ApprovalRequested)
	ap := data[event.ApprovalRequestedData](t, evs[len(evs)-1])
	evs = append(evs, g.until(t, event.ProviderNotice)...) // the duplicate's refusal, while the first is open
	if err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, g.until(t, event.TurnCompleted)...)
	if got := answerOf(t, evs); got != "yes" {
		t.Fatalf("agent got %q; events %s", got, types(evs))
	}
	// The duplicate shares the open request's requestId: its refusal is a
	// notice, never an approval.resolved that would close the open one.
	rs := of(evs, event.ApprovalResolved)
	if n := len(of(evs, event.ApprovalRequested)); n != 1 || len(rs) != 1 || data[event.ApprovalResolvedData](t, rs[0]).Decision != "approve" {
		t.Fatalf("events %s", types(evs))
	}
	if n := data[event.NoticeData](t, of(evs, event.ProviderNotice)[0]); !strings.Contains(n.Message, "already open") {
		t.Fatalf("notice %+v", n)
	}
	evs = g.turn(t, "t_2", "hello")
	if got := answerOf(t, evs); got != "Hello" {
		t.Fatalf("the next turn: %q", got)
	}
	if l := g.log(); strings.Count(l, "response_unknown_id") != 2 {
		t.Fatalf("log:\n%s", l)
	}
}

// A permission request when no turn runs (the prompt answered, no load,
// no cancel) is refused -32602 naming why, journaled resolved deny by the
// daemon, never relayed: open, it would keep the session busy for ever.
func TestPermissionOutsideTurn(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	g.turn(t, "t_1", "lateperm")
	evs := g.until(t, event.ApprovalResolved)
	if r := of(evs, event.ApprovalRequested); len(r) != 0 {
		t.Fatalf("relayed outside a turn: %s", r[0].Data)
	}
	res := data[event.ApprovalResolvedData](t, evs[len(evs)-1])
	if res.By != "daemon" || res.Decision != provider.DecisionDeny || !strings.Contains(res.Reason, "outside a turn") {
		t.Fatalf("resolved %+v", res)
	}
	timeout := time.After(20 * time.Second)
	for {
		for _, m := range g.sentLines() {
			if m["id"] == "late-1" {
				if answerText(m) != "-32602" {
					t.Fatalf("answered %v", m)
				}
				if g.a.Busy() {
					t.Fatal("busy with no turn and the request refused")
				}
				return
			}
		}
		select {
		case <-g.wrote:
		case <-timeout:
			t.Fatalf("the request was not answered\nlog:\n%s", g.log())
		}
	}
}
