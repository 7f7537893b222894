package codex

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// TestEchoWork: /work plays every item kind through a real echo child;
// the command's fate follows the decision.
func TestEchoWork(t *testing.T) {
	tests := []struct {
		decision   string
		wantStatus string // the command item's
		turn       event.TurnCompletedData
	}{
		{DecisionApprove, event.ItemCompletedStatus, event.TurnCompletedData{Status: event.StatusCompleted}},
		{DecisionApproveForSession, event.ItemCompletedStatus, event.TurnCompletedData{Status: event.StatusCompleted}},
		{DecisionDeny, event.ItemDeclinedStatus, event.TurnCompletedData{Status: event.StatusCompleted}},
		{DecisionCancel, event.ItemDeclinedStatus, event.TurnCompletedData{Status: event.StatusInterrupted, Reason: event.ReasonUserCancel}},
	}
	for _, tc := range tests {
		t.Run(tc.decision, func(t *testing.T) {
			a, _, rec := newEchoAdapter(t, t.TempDir(), "")
			ctx := testCtx(t)
			if _, err := a.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.StartTurn(ctx, "t_1", "do /work 3"); err != nil {
				t.Fatal(err)
			}
			req := decode[event.ApprovalRequestedData](t, rec.waitFor(t, event.ApprovalRequested, "t_1"))
			if req.Kind != "command" || req.ItemID == "" || !slices.Equal(req.Options, []string{"approve", "approveForSession", "deny", "cancel"}) {
				t.Fatalf("approval.requested %+v", req)
			}
			if err := a.Respond(ctx, req.RequestID, Answer{Decision: tc.decision}); err != nil {
				t.Fatal(err)
			}
			done := decode[event.TurnCompletedData](t, rec.waitFor(t, event.TurnCompleted, "t_1"))
			done.ProviderTurnID = ""
			if done != tc.turn {
				t.Fatalf("turn.completed %+v, want %+v", done, tc.turn)
			}
			var cmd *event.ItemData
			kinds := map[string]bool{}
			output := ""
			for _, d := range rec.all() {
				switch d.Type {
				case event.ItemCompleted:
					it := decode[event.ItemData](t, d)
					kinds[it.Kind] = true
					if it.Kind == event.KindCommandExecution {
						cmd = &it
					}
				case event.ItemDelta:
					if dd := decode[event.ItemDeltaData](t, d); dd.Stream == event.StreamOutput {
						output += dd.Text
					}
				}
			}
			if n := checkDeltaParts(t, rec.all()); n == 0 {
				t.Fatal("no delta to check the parts of")
			}
			if cmd == nil || cmd.Status != tc.wantStatus || cmd.ItemID != req.ItemID {
				t.Fatalf("command item %+v, want status %s", cmd, tc.wantStatus)
			}
			if tc.wantStatus == event.ItemCompletedStatus {
				p := cmd.Payload.(map[string]any)
				if output != "1\n2\n3\n" || p["output"] != output || p["exitCode"] != float64(0) {
					t.Fatalf("output deltas %q, payload %v", output, p)
				}
				for _, k := range []string{event.KindReasoning, event.KindFileChange} {
					if !kinds[k] {
						t.Errorf("no %s item", k)
					}
				}
				types := typesOf(rec.all())
				for _, typ := range []string{event.TurnPlan, event.TurnDiff, event.TurnUsage, event.MessageCompleted} {
					if !strings.Contains(types, typ) {
						t.Errorf("no %s in %s", typ, types)
					}
				}
			} else if output != "" {
				t.Fatalf("a %s command streamed output %q", tc.decision, output)
			}
		})
	}
}

// TestEchoAsk: /ask relays a userInput question; the answer reaches the
// provider; a decision outside the options is refused and leaves it open.
func TestEchoAsk(t *testing.T) {
	a, _, rec := newEchoAdapter(t, t.TempDir(), "")
	ctx := testCtx(t)
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.StartTurn(ctx, "t_1", "/ask"); err != nil {
		t.Fatal(err)
	}
	req := decode[event.ApprovalRequestedData](t, rec.waitFor(t, event.ApprovalRequested, "t_1"))
	if req.Kind != "userInput" || !slices.Equal(req.Options, []string{"approve", "deny"}) {
		t.Fatalf("approval.requested %+v", req)
	}
	var de *DecisionError
	err := a.Respond(ctx, req.RequestID, Answer{Decision: DecisionApproveForSession})
	if !errors.As(err, &de) || !errors.Is(err, ErrDecisionNotAllowed) || !slices.Equal(de.Allowed, req.Options) {
		t.Fatalf("respond approveForSession: %v", err)
	}
	if err := a.Respond(ctx, req.RequestID, Answer{Decision: DecisionApprove, Answers: map[string][]string{"q1": {"hello"}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Respond(ctx, req.RequestID, Answer{Decision: DecisionApprove}); !errors.Is(err, ErrRequestNotFound) {
		t.Fatalf("answered twice: %v", err)
	}
	msg := decode[event.DeltaData](t, rec.waitFor(t, event.MessageCompleted, "t_1"))
	if !strings.Contains(msg.Text, "(answer: hello)") || msg.ItemID == "" {
		t.Fatalf("message.completed %+v", msg)
	}
}

// TestOpenApprovalsCancelledAtTurnEnd: a turn that ends with an approval
// nobody answered journals its cancel before turn.completed; a request the
// provider withdraws is closed too, and answering it is request_not_found.
func TestOpenApprovalsCancelledAtTurnEnd(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	params := map[string]any{"threadId": "thr_1", "turnId": "pt", "itemId": "c1", "command": "ls"}
	f.send(t, map[string]any{"id": 0, "method": "item/commandExecution/requestApproval", "params": params})
	f.send(t, map[string]any{"id": 1, "method": "item/fileChange/requestApproval", "params": params})
	f.rec.waitForNth(t, event.ApprovalRequested, "t_1", 2)
	f.send(t, map[string]any{"method": "serverRequest/resolved", "params": map[string]any{"threadId": "thr_1", "requestId": 1}})
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "thr_1", "turn": map[string]any{"id": "pt", "status": "completed"}}})
	f.rec.waitFor(t, event.TurnCompleted, "t_1")
	if got := typesOf(f.rec.all()); got != "approval.requested,approval.requested,approval.resolved,approval.resolved,turn.completed" {
		t.Fatalf("events %s", got)
	}
	evs := f.rec.all()
	withdrawn := decode[event.ApprovalResolvedData](t, evs[2])
	cancelled := decode[event.ApprovalResolvedData](t, evs[3])
	if withdrawn != (event.ApprovalResolvedData{RequestID: "1", Decision: "cancel", By: "provider", Reason: "withdrawn"}) ||
		cancelled != (event.ApprovalResolvedData{RequestID: "0", Decision: "cancel", By: "daemon", Reason: "turn_ended"}) {
		t.Fatalf("resolved %+v then %+v", withdrawn, cancelled)
	}
	for _, id := range []string{"0", "1"} {
		if err := f.a.Respond(context.Background(), id, Answer{Decision: DecisionApprove}); !errors.Is(err, ErrRequestNotFound) {
			t.Fatalf("respond %s after the turn: %v", id, err)
		}
	}
}

// TestItemCaps: command output past 64 KiB per item is counted, not
// journaled; an item object past 64 KiB keeps no raw.
func TestItemCaps(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	big := strings.Repeat("o", event.MaxOutputBytes+1000)
	with := func(kv ...any) map[string]any {
		m := map[string]any{"threadId": "thr_1", "turnId": "pt"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	f.send(t, map[string]any{"method": "item/commandExecution/outputDelta", "params": with("itemId", "c1", "delta", big)})
	f.send(t, map[string]any{"method": "item/commandExecution/outputDelta", "params": with("itemId", "c1", "delta", "more")})
	f.send(t, map[string]any{"method": "item/completed", "params": with("item", map[string]any{"type": "commandExecution", "id": "c1",
		"command": "yes", "cwd": "/", "status": "completed", "exitCode": 0, "aggregatedOutput": big + "more"})})
	it := decode[event.ItemData](t, f.rec.waitFor(t, event.ItemCompleted, "t_1"))
	p := it.Payload.(map[string]any)
	if len(p["output"].(string)) != event.MaxOutputBytes || p["outputTruncated"] != float64(1004) || !it.RawTruncated || it.Raw != nil {
		t.Fatalf("output %d bytes, truncated %v, rawTruncated %v raw %d", len(p["output"].(string)), p["outputTruncated"], it.RawTruncated, len(it.Raw))
	}
	n := 0
	for _, d := range f.rec.all() {
		if d.Type == event.ItemDelta {
			n += len(decode[event.ItemDeltaData](t, d).Text)
		}
	}
	if n != event.MaxOutputBytes {
		t.Fatalf("journaled %d output bytes, want the cap %d", n, event.MaxOutputBytes)
	}
}

// TestBadRequestIDs: a provider request whose id is neither a string nor
// a number is logged and left unanswered; nothing else breaks.
func TestBadRequestIDs(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	params := map[string]any{"threadId": "thr_1", "turnId": "pt", "itemId": "c1"}
	f.send(t, map[string]any{"id": map[string]any{"x": 1}, "method": "item/commandExecution/requestApproval", "params": params})
	f.send(t, map[string]any{"id": []int{1}, "method": "item/tool/call", "params": params})
	f.send(t, map[string]any{"id": 7, "method": "item/commandExecution/requestApproval", "params": params})
	req := decode[event.ApprovalRequestedData](t, f.rec.waitFor(t, event.ApprovalRequested, "t_1"))
	if req.RequestID != "7" || len(f.rec.all()) != 1 {
		t.Fatalf("events %s, first request %+v", typesOf(f.rec.all()), req)
	}
	if err := f.a.Respond(context.Background(), "7", Answer{Decision: DecisionDeny}); err != nil {
		t.Fatal(err)
	}
	if ans := f.expect(t, ""); ans["id"] != float64(7) {
		t.Fatalf("the only answer written: %v", ans)
	}
}

// TestFinalErrorAwaitsTurnCompleted: codex ends a failed turn with a final
// `error` and then its own turn/completed {failed}. Until that turn/completed
// the turn is still active in codex, which folds a turn/start sent in
// between into it (seen with the real codex and a model answering 500: the
// answer carried the old turn's id, the input never reached the model and
// the new turn never completed). So the `error` must not end the turn: the
// next send is refused until turn/completed, which carries the error.
func TestFinalErrorAwaitsTurnCompleted(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt_1")
	f.send(t, map[string]any{"method": "error", "params": map[string]any{"threadId": "thr_1", "turnId": "pt_1",
		"error": map[string]any{"message": "500"}, "willRetry": false}})
	// A line read after the `error` (a notice whatever the turn's state):
	// once it is emitted, the `error` was handled.
	f.send(t, map[string]any{"method": "error", "params": map[string]any{"threadId": "thr_1", "turnId": "pt_1",
		"error": map[string]any{"message": "marker"}, "willRetry": true}})
	f.rec.waitFor(t, event.ProviderNotice, "")
	if types := typesOf(f.rec.all()); types != "provider.notice" || !f.a.Busy() {
		t.Fatalf("after the final error: events %s, busy %v; the turn must stay open until turn/completed", types, f.a.Busy())
	}
	if err := f.a.StartTurn(testCtx(t), "t_2", "again"); !errors.Is(err, ErrTurnRunning) {
		t.Fatalf("a send before codex's turn/completed: %v, want ErrTurnRunning", err)
	}
	// codex's own turn/completed; without an error of its own, the one of
	// the `error` is the turn's.
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "thr_1",
		"turn": map[string]any{"id": "pt_1", "status": "failed"}}})
	got := decode[event.TurnCompletedData](t, f.rec.waitFor(t, event.TurnCompleted, "t_1"))
	if got != (event.TurnCompletedData{Status: event.StatusFailed, Reason: event.ReasonProviderError, ProviderTurnID: "pt_1", Error: "500"}) {
		t.Fatalf("t_1 ended %+v", got)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.a.StartTurn(context.Background(), "t_2", "again") }()
	f.reply(t, f.expect(t, "turn/start"), map[string]any{"turn": map[string]any{"id": "pt_2", "status": "inProgress"}})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "thr_1", "turn": map[string]any{"id": "pt_2", "status": "completed"}}})
	if got := decode[event.TurnCompletedData](t, f.rec.waitFor(t, event.TurnCompleted, "t_2")); got.Status != event.StatusCompleted || got.ProviderTurnID != "pt_2" {
		t.Fatalf("t_2 ended %+v", got)
	}
	if types := typesOf(f.rec.all()); types != "provider.notice,turn.completed,turn.completed" {
		t.Fatalf("events %s", types)
	}
}
