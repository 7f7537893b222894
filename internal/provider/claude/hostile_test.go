package claude

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// A CLI that never answers initialize fails Start with ErrTimeout (the
// hold fails, nothing waits forever); one that refuses it fails Start
// with its words.
func TestStartWithoutInitAnswer(t *testing.T) {
	f := newFake(t, func(o *provider.Options) { o.RequestTimeout = 300 * time.Millisecond })
	errc := make(chan error, 1)
	go func() { _, err := f.a.Start(t.Context()); errc <- err }()
	f.read(t)
	if err := <-errc; !errors.Is(err, provider.ErrTimeout) {
		t.Fatalf("start: %v", err)
	}
	g := newFake(t, nil)
	go func() { _, err := g.a.Start(t.Context()); errc <- err }()
	init := g.read(t)
	g.send(t, map[string]any{"type": "control_response", "response": map[string]any{"subtype": "error",
		"request_id": init["request_id"], "error": "not today"}})
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "not today") {
		t.Fatalf("start: %v", err)
	}
}

// The start's deadline (start_timeout) bounds initialize, not the request
// timeout: a CLI that has not answered when the request timeout passes is
// still waited for, until the deadline.
func TestStartWaitsUntilTheDeadline(t *testing.T) {
	f := newFake(t, func(o *provider.Options) { o.RequestTimeout = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := f.a.Start(ctx); errc <- err }()
	f.read(t)
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, provider.ErrTimeout) {
		t.Fatalf("start: %v, want the start's deadline, not the request timeout", err)
	}
}

// A fresh CLI whose turn never sends system/init still names its
// conversation: the result's session_id is recorded, so the next hold
// can resume it.
func TestSessionIDFromResultWithoutInit(t *testing.T) {
	learned := make(chan string, 8)
	f := newFake(t, func(o *provider.Options) { o.OnThreadID = func(id string) { learned <- id } })
	f.startWith(t)
	if err := f.a.StartTurn(t.Context(), "t_1", "hi"); err != nil {
		t.Fatal(err)
	}
	f.read(t)
	f.send(t, map[string]any{"type": "result", "subtype": "success", "session_id": "sess-r"})
	f.next(t, event.TurnCompleted)
	select {
	case id := <-learned:
		if id != "sess-r" {
			t.Fatalf("recorded %s", id)
		}
	default:
		t.Fatal("the conversation's id was never recorded")
	}
	// A later result naming another id does not move a known thread.
	if err := f.a.StartTurn(t.Context(), "t_2", "hi"); err != nil {
		t.Fatal(err)
	}
	f.read(t)
	f.send(t, map[string]any{"type": "result", "subtype": "success", "session_id": "sess-other"})
	f.next(t, event.TurnCompleted)
	if f.a.ThreadID() != "sess-r" || len(learned) != 0 {
		t.Fatalf("thread %s, learned %d more", f.a.ThreadID(), len(learned))
	}
}

// Bad answers: a decision the request does not offer (named in the
// error, the approval stays open), a second answer, an answer after the
// CLI withdrew the request.
func TestClaudeBadAnswers(t *testing.T) {
	f := newFake(t, nil)
	f.started(t)
	f.send(t, map[string]any{"type": "control_request", "request_id": "q", "request": map[string]any{
		"subtype": "can_use_tool", "tool_name": "AskUserQuestion", "input": map[string]any{}, "tool_use_id": "toolu_q"}})
	f.next(t, event.ApprovalRequested)
	var de *provider.DecisionError
	if err := f.a.Respond(t.Context(), "q", provider.Answer{Decision: "approveForSession"}); !errors.As(err, &de) ||
		!slices.Equal(de.Allowed, []string{"approve", "deny", "cancel"}) {
		t.Fatalf("decision not offered: %v", err)
	}
	if err := f.a.Respond(t.Context(), "q", provider.Answer{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	f.read(t)
	if err := f.a.Respond(t.Context(), "q", provider.Answer{Decision: "deny"}); !errors.Is(err, provider.ErrRequestNotFound) {
		t.Fatalf("second answer: %v", err)
	}
	f.send(t, map[string]any{"type": "control_request", "request_id": "w", "request": map[string]any{
		"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{}, "tool_use_id": "toolu_w"}})
	f.next(t, event.ApprovalRequested)
	f.send(t, map[string]any{"type": "control_cancel_request", "request_id": "w"})
	f.send(t, map[string]any{"type": "control_cancel_request", "request_id": "never-asked"})
	res := decodeData[event.ApprovalResolvedData](t, f.next(t, event.ApprovalResolved))
	for res.RequestID != "w" {
		res = decodeData[event.ApprovalResolvedData](t, f.next(t, event.ApprovalResolved))
	}
	if res.By != "provider" || res.Reason != "withdrawn" {
		t.Fatalf("withdrawn %+v", res)
	}
	if err := f.a.Respond(t.Context(), "w", provider.Answer{Decision: "approve"}); !errors.Is(err, provider.ErrRequestNotFound) {
		t.Fatalf("answer after withdrawal: %v", err)
	}
}
