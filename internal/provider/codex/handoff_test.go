package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// TestHandoffCutLineAndPendingApproval: the provider's stdout holds a
// whole line and half of the next when Pause stops the reader; the half is
// handed over (Unparsed), and an adapter adopted from the paused state
// over the same pipe parses the cut line once, whole, when the rest
// arrives; the approval pending at the pause is answered with the
// provider's id; nothing is sent to the provider by the handover.
func TestHandoffCutLineAndPendingApproval(t *testing.T) {
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var in *Options
	f := newFake(t, func(o *Options) { o.Out = outR; o.RequestIDPrefix = "f1-"; in = o })
	f.outW = outW
	f.handshake(t)
	f.startTurn(t, "t_1", "pt")
	f.send(t, map[string]any{"id": 9, "method": "item/commandExecution/requestApproval", "params": map[string]any{"turnId": "pt"}})
	req := decode[event.ApprovalRequestedData](t, f.rec.waitFor(t, event.ApprovalRequested, "t_1"))

	delta := func(d string) []byte {
		b, _ := json.Marshal(map[string]any{"method": "item/agentMessage/delta", "params": map[string]any{"turnId": "pt", "delta": d}})
		return append(b, '\n')
	}
	cut := delta("bb")
	half := len(cut) / 2
	// One write, under PIPE_BUF: the reader gets the whole line and the
	// half together, so once "a" is emitted the half is in its buffer.
	if _, err := outW.Write(append(delta("a"), cut[:half]...)); err != nil {
		t.Fatal(err)
	}
	f.rec.waitForNth(t, event.MessageDelta, "t_1", 1)
	p, err := f.a.Pause(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		outW.Close()
		f.a.Resume() // the old reader, parked as the exec would leave it, sees EOF
	})
	if !bytes.Equal(p.Unparsed, cut[:half]) {
		t.Fatalf("unparsed %q, want %q", p.Unparsed, cut[:half])
	}

	// The new image wraps the inherited descriptor afresh; here the same
	// *os.File stands in for it, without the pause's deadline.
	if err := outR.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	rec2 := newRecorder()
	o2 := *in
	o2.Out, o2.Emit = outR, rec2.emit
	a2, err := Adopt(o2, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		outW.Close()
		<-a2.Done()
	})
	if _, err := outW.Write(cut[half:]); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- a2.Respond(context.Background(), req.RequestID, decide(true)) }()
	if ans := f.expect(t, ""); ans["id"] != float64(9) {
		t.Fatalf("the approval pending at the pause was answered as %v", ans)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"turn": map[string]any{"id": "pt", "status": "completed"}}})
	rec2.waitFor(t, event.TurnCompleted, "t_1")
	if got := turnText(f.rec.all(), "t_1") + "|" + turnText(rec2.all(), "t_1"); got != "a|bb" {
		t.Fatalf("deltas before|after the handover: %q, want %q", got, "a|bb")
	}
}

// TestPauseRefusesRequestInFlight: one of our requests still waiting for
// its answer cannot be handed over; the adapter carries on.
func TestPauseRefusesRequestInFlight(t *testing.T) {
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t, func(o *Options) { o.Out = outR })
	f.outW = outW
	t.Cleanup(func() { outW.Close() }) // before the fake's cleanup waits for the reader
	f.handshake(t)
	errc := make(chan error, 1)
	go func() { errc <- f.a.StartTurn(testCtx(t), "t_1", "hi") }()
	m := f.expect(t, "turn/start")
	if _, err := f.a.Pause(testCtx(t)); !errors.Is(err, provider.ErrRequestInFlight) {
		t.Fatalf("Pause with turn/start unanswered: %v", err)
	}
	f.reply(t, m, map[string]any{"turn": map[string]any{"id": "pt", "status": "inProgress"}})
	if err := <-errc; err != nil {
		t.Fatalf("the adapter did not carry on after the refused pause: %v", err)
	}
}
