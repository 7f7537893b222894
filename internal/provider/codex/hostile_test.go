package codex

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// A notification with a field of the wrong type costs that field, not the
// notification: an item still completes, and the turn still ends.
func TestDamagedFieldsStillCount(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	f.send(t, `{"method":"item/started","params":{"threadId":"thr_1","turnId":"pt","item":{"type":"commandExecution","id":"c1","command":"ls","status":"inProgress"}}}`)
	f.rec.waitFor(t, event.ItemStarted, "t_1")
	f.send(t, `{"method":"item/completed","params":{"threadId":"thr_1","turnId":"pt","item":{"type":"commandExecution","id":"c1","command":"ls","exitCode":"zero","durationMs":"5","status":"completed","aggregatedOutput":"ok"}}}`)
	it := decode[event.ItemData](t, f.rec.waitFor(t, event.ItemCompleted, "t_1"))
	if it.ItemID != "c1" || it.Status != event.ItemCompletedStatus {
		t.Fatalf("item.completed %+v", it)
	}
	if p := it.Payload.(map[string]any); p["output"] != "ok" || p["exitCode"] != nil {
		t.Fatalf("payload %v", p)
	}
	f.send(t, `{"method":"turn/completed","params":{"threadId":5,"willRetry":"no","turn":{"id":"pt","status":"completed","error":null}}}`)
	if tc := decode[event.TurnCompletedData](t, f.rec.waitFor(t, event.TurnCompleted, "t_1")); tc.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %+v", tc)
	}
	if !strings.Contains(f.logs.String(), "kind=bad_field") {
		t.Fatalf("damaged fields not logged:\n%s", f.logs.String())
	}
}

// A late or repeated turn/completed of a turn that ended never ends the
// next one; notifications of another turn are not journaled in ours.
func TestRepeatedTurnCompletedAndStrangers(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt1")
	done1 := `{"method":"turn/completed","params":{"threadId":"thr_1","turn":{"id":"pt1","status":"completed"}}}`
	f.send(t, done1)
	f.rec.waitFor(t, event.TurnCompleted, "t_1")
	f.startTurn(t, "t_2", "pt2")
	f.send(t, done1)
	f.send(t, `{"method":"item/agentMessage/delta","params":{"threadId":"thr_1","turnId":"pt-other","itemId":"m","delta":"stranger"}}`)
	f.send(t, `{"method":"turn/completed","params":{"threadId":"thr_1","turn":{"id":"pt-other","status":"failed"}}}`)
	f.send(t, `{"method":"item/agentMessage/delta","params":{"threadId":"thr_1","turnId":"pt2","itemId":"m","delta":"mine"}}`)
	f.rec.waitFor(t, event.MessageDelta, "t_2")
	if !f.a.Busy() {
		t.Fatal("turn t_2 ended by another turn's turn/completed")
	}
	if got := turnText(f.rec.all(), "t_2"); got != "mine" {
		t.Fatalf("t_2 text %q", got)
	}
	f.send(t, `{"method":"turn/completed","params":{"threadId":"thr_1","turn":{"id":"pt2","status":"completed"}}}`)
	f.rec.waitFor(t, event.TurnCompleted, "t_2")
	if n := countOf(f.rec.all(), event.TurnCompleted); n != 2 {
		t.Fatalf("%d turn.completed: %s", n, typesOf(f.rec.all()))
	}
}

// item/completed without item/started is journaled (a client that missed
// the start needs only the completion); deltas of an item never started
// go with it.
func TestItemCompletedWithoutStarted(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	f.send(t, `{"method":"item/commandExecution/outputDelta","params":{"threadId":"thr_1","turnId":"pt","itemId":"c9","delta":"out"}}`)
	f.send(t, `{"method":"item/completed","params":{"threadId":"thr_1","turnId":"pt","item":{"type":"commandExecution","id":"c9","command":"ls","exitCode":0,"status":"completed","aggregatedOutput":"out"}}}`)
	it := decode[event.ItemData](t, f.rec.waitFor(t, event.ItemCompleted, "t_1"))
	if it.ItemID != "c9" || it.Status != event.ItemCompletedStatus {
		t.Fatalf("item.completed %+v", it)
	}
	f.send(t, `{"method":"turn/completed","params":{"threadId":"thr_1","turn":{"id":"pt","status":"completed"}}}`)
	f.rec.waitFor(t, event.TurnCompleted, "t_1")
	if n := countOf(f.rec.all(), event.ItemCompleted); n != 1 {
		t.Fatalf("%d item.completed: %s", n, typesOf(f.rec.all()))
	}
}

// Answers a provider cannot take: a decision not in the options (the
// error names them, the approval stays open), a second answer, an answer
// after the provider withdrew the request.
func TestBadAnswers(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	f.send(t, map[string]any{"id": 1, "method": "item/tool/requestUserInput", "params": map[string]any{"turnId": "pt", "itemId": "q"}})
	f.send(t, map[string]any{"id": 2, "method": "item/commandExecution/requestApproval", "params": map[string]any{"turnId": "pt", "itemId": "c"}})
	f.rec.waitForNth(t, event.ApprovalRequested, "t_1", 2)
	var de *DecisionError
	if err := f.a.Respond(context.Background(), "1", Answer{Decision: "approveForSession"}); !errors.As(err, &de) ||
		!slices.Equal(de.Allowed, []string{"approve", "deny"}) {
		t.Fatalf("decision not in options: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.a.Respond(context.Background(), "1", Answer{Decision: "deny"}) }()
	f.expect(t, "")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := f.a.Respond(context.Background(), "1", Answer{Decision: "deny"}); !errors.Is(err, ErrRequestNotFound) {
		t.Fatalf("second answer: %v", err)
	}
	f.send(t, map[string]any{"method": "serverRequest/resolved", "params": map[string]any{"threadId": "thr_1", "requestId": 2}})
	res := decode[event.ApprovalResolvedData](t, f.rec.waitForNth(t, event.ApprovalResolved, "t_1", 2))
	if res.RequestID != "2" || res.By != "provider" || res.Reason != "withdrawn" {
		t.Fatalf("withdrawn %+v", res)
	}
	if err := f.a.Respond(context.Background(), "2", Answer{Decision: "approve"}); !errors.Is(err, ErrRequestNotFound) {
		t.Fatalf("answer after withdrawal: %v", err)
	}
}

// An error response that is no error object still fails the call it
// answers, at once and with the provider's words (it was dropped: the
// call waited for its timeout).
func TestMalformedErrorResponseFailsCall(t *testing.T) {
	f := newFake(t, nil)
	f.handshake(t)
	errc := make(chan error, 1)
	go func() { errc <- f.a.StartTurn(testCtx(t), "t_1", "hi") }()
	m := f.expect(t, "turn/start")
	f.send(t, map[string]any{"id": m["id"], "error": "boom"})
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "boom") || errors.Is(err, ErrTimeout) {
		t.Fatalf("turn/start answered with a bare error: %v", err)
	}
}
