package codex

import (
	"errors"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

func TestStartAndStreamedTurn(t *testing.T) {
	home := t.TempDir()
	a, _, rec := newEchoAdapter(t, home, "")
	ctx := testCtx(t)
	res, err := a.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ThreadID == "" || res.Resumed || res.Replaced != nil {
		t.Fatalf("start result %+v", res)
	}
	if err := a.StartTurn(ctx, "t_1", "hello world"); err != nil {
		t.Fatal(err)
	}
	done := decode[event.TurnCompletedData](t, rec.waitFor(t, event.TurnCompleted, "t_1"))
	if done.Status != event.StatusCompleted || done.Reason != "" || done.ProviderTurnID == "" {
		t.Fatalf("turn.completed %+v", done)
	}
	evs := rec.all()
	if got := turnText(evs, "t_1"); got != "echo: hello world" {
		t.Fatalf("deltas %q", got)
	}
	var deltas int
	for _, d := range evs {
		if d.Type == event.TurnStarted {
			t.Fatal("adapter emitted turn.started; the host writes it")
		}
		if d.TurnID != "t_1" {
			t.Fatalf("event %s has turn %q, want ours", d.Type, d.TurnID)
		}
		if d.Type == event.MessageDelta {
			deltas++
			if dd := decode[event.DeltaData](t, d); dd.ProviderTurnID != done.ProviderTurnID {
				t.Fatalf("delta providerTurnId %q, want %q", dd.ProviderTurnID, done.ProviderTurnID)
			}
		}
	}
	if deltas < 2 {
		t.Fatalf("want a few deltas, got %d", deltas)
	}
	mc := decode[event.DeltaData](t, rec.waitFor(t, event.MessageCompleted, "t_1"))
	if mc.Text != "echo: hello world" {
		t.Fatalf("message.completed %q", mc.Text)
	}
	if last := evs[len(evs)-1]; last.Type != event.TurnCompleted {
		t.Fatalf("last event %s", last.Type)
	}
	if a.Busy() {
		t.Fatal("busy after turn.completed")
	}
}

func TestResumeAfterProcessReplaced(t *testing.T) {
	home := t.TempDir()
	a1, p1, rec1 := newEchoAdapter(t, home, "")
	ctx := testCtx(t)
	res1, err := a1.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a1.StartTurn(ctx, "t_1", "first"); err != nil {
		t.Fatal(err)
	}
	rec1.waitFor(t, event.TurnCompleted, "t_1")
	_ = p1.in.Close()
	<-a1.Done()
	if code := p1.exitCode(t); code != 0 {
		t.Fatalf("echo exit code %d on stdin EOF", code)
	}

	a2, _, rec2 := newEchoAdapter(t, home, res1.ThreadID)
	res2, err := a2.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res2.Resumed || res2.ThreadID != res1.ThreadID || res2.Replaced != nil {
		t.Fatalf("resume result %+v, want thread %s resumed", res2, res1.ThreadID)
	}
	if err := a2.StartTurn(ctx, "t_2", "second"); err != nil {
		t.Fatal(err)
	}
	rec2.waitFor(t, event.TurnCompleted, "t_2")
	if got := turnText(rec2.all(), "t_2"); got != "echo: second" {
		t.Fatalf("deltas %q", got)
	}
	if n := threadTurns(t, home, res1.ThreadID); n != 2 {
		t.Fatalf("thread history has %d turns, want 2", n)
	}
}

func TestResumeUnknownThreadStartsFresh(t *testing.T) {
	tests := []struct {
		name   string
		forget bool // make the thread unknown via /forget instead of a made-up id
	}{
		{name: "made-up id"},
		{name: "forgotten thread", forget: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			ctx := testCtx(t)
			old := "thr_doesnotexist"
			if tc.forget {
				a, p, rec := newEchoAdapter(t, home, "")
				res, err := a.Start(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := a.StartTurn(ctx, "t_1", "bye /forget"); err != nil {
					t.Fatal(err)
				}
				rec.waitFor(t, event.TurnCompleted, "t_1")
				_ = p.in.Close()
				<-a.Done()
				old = res.ThreadID
			}
			a, _, rec := newEchoAdapter(t, home, old)
			res, err := a.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Resumed || res.Replaced == nil || res.ThreadID == "" || res.ThreadID == old {
				t.Fatalf("start result %+v", res)
			}
			rp := *res.Replaced
			if rp.OldThreadID != old || rp.NewThreadID != res.ThreadID || !strings.Contains(rp.Cause, "no rollout found") {
				t.Fatalf("replaced %+v", rp)
			}
			got := decode[event.ThreadReplacedData](t, rec.waitFor(t, event.ProviderThreadReplace, ""))
			if got != rp {
				t.Fatalf("event %+v, want %+v", got, rp)
			}
			if err := a.StartTurn(ctx, "t_2", "fresh"); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(t, event.TurnCompleted, "t_2")
		})
	}
}

func TestInterruptedTurn(t *testing.T) {
	a, _, rec := newEchoAdapter(t, t.TempDir(), "")
	ctx := testCtx(t)
	if ok, err := a.Interrupt(ctx); ok || err != nil {
		t.Fatalf("interrupt with no turn: %v %v", ok, err)
	}
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.StartTurn(ctx, "t_1", "/sleep 600000"); err != nil {
		t.Fatal(err)
	}
	if !a.Busy() {
		t.Fatal("not busy during a turn")
	}
	if err := a.StartTurn(ctx, "t_2", "overlap"); !errors.Is(err, ErrTurnRunning) {
		t.Fatalf("second turn while one runs: %v", err)
	}
	ok, err := a.Interrupt(ctx)
	if !ok || err != nil {
		t.Fatalf("interrupt: %v %v", ok, err)
	}
	done := decode[event.TurnCompletedData](t, rec.waitFor(t, event.TurnCompleted, "t_1"))
	if done.Status != event.StatusInterrupted || done.Reason != event.ReasonUserCancel {
		t.Fatalf("turn.completed %+v", done)
	}
	if a.Busy() {
		t.Fatal("busy after the interrupted turn completed")
	}
}

func TestApproval(t *testing.T) {
	tests := []struct {
		approve  bool
		decision string
		answer   string
	}{
		{approve: true, decision: "approve", answer: "echo: run /approve"},
		{approve: false, decision: "deny", answer: "declined"},
	}
	for _, tc := range tests {
		t.Run(tc.decision, func(t *testing.T) {
			a, _, rec := newEchoAdapter(t, t.TempDir(), "")
			ctx := testCtx(t)
			if _, err := a.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.StartTurn(ctx, "t_1", "run /approve"); err != nil {
				t.Fatal(err)
			}
			req := decode[event.ApprovalRequestedData](t, rec.waitFor(t, event.ApprovalRequested, "t_1"))
			if req.Kind != "command" || req.RequestID == "" || !strings.Contains(string(req.Detail), `"command"`) {
				t.Fatalf("approval.requested %+v", req)
			}
			if !a.Busy() {
				t.Fatal("not busy with a pending approval")
			}
			if err := a.Respond(ctx, "no-such-request", decide(true)); !errors.Is(err, ErrRequestNotFound) {
				t.Fatalf("respond unknown: %v", err)
			}
			if err := a.Respond(ctx, req.RequestID, decide(tc.approve)); err != nil {
				t.Fatal(err)
			}
			if err := a.Respond(ctx, req.RequestID, decide(tc.approve)); !errors.Is(err, ErrRequestNotFound) {
				t.Fatalf("second respond: %v", err)
			}
			rec.waitFor(t, event.TurnCompleted, "t_1")
			evs := rec.all()
			var order []string
			for _, d := range evs {
				order = append(order, d.Type)
			}
			res := decode[event.ApprovalResolvedData](t, rec.waitFor(t, event.ApprovalResolved, "t_1"))
			if res.RequestID != req.RequestID || res.Decision != tc.decision {
				t.Fatalf("approval.resolved %+v", res)
			}
			if got := strings.Join(order, ","); !strings.HasPrefix(got, "approval.requested,approval.resolved,message.delta") {
				t.Fatalf("event order %s", got)
			}
			if got := turnText(evs, "t_1"); got != tc.answer {
				t.Fatalf("answer %q, want %q", got, tc.answer)
			}
		})
	}
}
