package claude

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

// handoffFake is a fake whose stdout is an os.Pipe (its reads can be
// paused, as a child's can), started, with turn t_1 open.
func handoffFake(t *testing.T) (*fake, *os.File, *provider.Options) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var in provider.Options
	f := newFake(t, func(o *provider.Options) { o.Out = outR; o.RequestIDPrefix = "f1-"; in = *o })
	t.Cleanup(func() { outW.Close() })
	done := make(chan error, 1)
	go func() { _, err := f.a.Start(t.Context()); done <- err }()
	init := f.read(t)
	if _, err := outW.Write(line(t, map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
		"request_id": init["request_id"], "response": map[string]any{}}})); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := f.a.StartTurn(t.Context(), "t_1", "hi"); err != nil {
		t.Fatal(err)
	}
	if m := f.read(t); m["type"] != "user" {
		t.Fatalf("turn wrote %v", m)
	}
	return f, outW, &in
}

func line(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func streamEvent(t *testing.T, ev map[string]any) []byte {
	return line(t, map[string]any{"type": "stream_event", "event": ev, "api_message_id": "msg_1", "session_id": "sess-1"})
}

func textDelta(t *testing.T, s string) []byte {
	return streamEvent(t, map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": s}})
}

// TestHandoffMidTurn: a turn streaming a text block, a tool's item open
// and a can_use_tool request (numeric request_id) pending when Pause stops
// the reader with half a line read; an adapter adopted from the paused
// state over the same pipe parses the cut line once, completes the text
// block with the whole text (deltas before and after), answers the
// approval with the CLI's own id, completes the tool's item and ends the
// turn; the handover itself writes nothing to the CLI.
func TestHandoffMidTurn(t *testing.T) {
	f, outW, in := handoffFake(t)
	write := func(b []byte) {
		t.Helper()
		if _, err := outW.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	write(line(t, map[string]any{"type": "system", "subtype": "init", "session_id": "sess-1"}))
	write(streamEvent(t, map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}))
	write(textDelta(t, "a"))
	write(line(t, map[string]any{"type": "assistant", "session_id": "sess-1", "message": map[string]any{"content": []any{
		map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "ls"}}}}}))
	write([]byte(`{"type":"control_request","request_id":7,"request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"toolu_1"}}` + "\n"))
	req := decodeData[event.ApprovalRequestedData](t, f.next(t, event.ApprovalRequested))

	cut := textDelta(t, "bb")
	half := len(cut) / 2
	// One write, under PIPE_BUF: the reader gets the whole line and the
	// half together, so once "c" is emitted the half is in its buffer.
	write(append(textDelta(t, "c"), cut[:half]...))
	for {
		if d := f.next(t, event.MessageDelta); decodeData[event.DeltaData](t, d).Text == "c" {
			break
		}
	}
	p, err := f.a.Pause(t.Context())
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
	if !f.a.Busy() {
		t.Fatal("paused adapter not busy")
	}

	// The new image wraps the inherited descriptor afresh; here the same
	// *os.File stands in for it, without the pause's deadline.
	outR := in.Out.(*os.File)
	if err := outR.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	evs := make(chan event.Draft, 1024)
	o2 := *in
	o2.ThreadID, o2.Emit = "", func(d event.Draft) { evs <- d }
	pa, err := Adopt(o2, p)
	if err != nil {
		t.Fatal(err)
	}
	a2 := pa.(*Adapter)
	t.Cleanup(func() {
		outW.Close()
		<-a2.Done()
	})
	if a2.ThreadID() != "sess-1" || !a2.Busy() {
		t.Fatalf("adopted: thread %q busy %v", a2.ThreadID(), a2.Busy())
	}
	next := func(typ string) event.Draft {
		t.Helper()
		for {
			select {
			case d := <-evs:
				if d.Type == typ {
					return d
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("adopted adapter: no %s", typ)
			}
		}
	}
	write(cut[half:])
	if got := decodeData[event.DeltaData](t, next(event.MessageDelta)); got.Text != "bb" {
		t.Fatalf("the cut line after the handover: %+v", got)
	}
	if err := a2.Respond(context.Background(), req.RequestID, provider.Answer{Decision: provider.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	ans := f.read(t)
	if resp := ans["response"].(map[string]any); resp["request_id"] != float64(7) || resp["subtype"] != "success" {
		t.Fatalf("the approval pending at the pause was answered as %v", ans)
	}
	write(streamEvent(t, map[string]any{"type": "content_block_stop", "index": 0}))
	if got := decodeData[event.DeltaData](t, next(event.MessageCompleted)); got.Text != "acbb" {
		t.Fatalf("message.completed %q, want the whole block %q", got.Text, "acbb")
	}
	write(line(t, map[string]any{"type": "user", "message": map[string]any{"content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "file"}}}}))
	if it := decodeData[event.ItemData](t, next(event.ItemCompleted)); it.ItemID != "toolu_1" || it.Status != event.ItemCompletedStatus {
		t.Fatalf("tool item after the handover: %+v", it)
	}
	write(line(t, map[string]any{"type": "result", "subtype": "success", "session_id": "sess-1", "usage": map[string]any{}}))
	if tc := next(event.TurnCompleted); tc.TurnID != "t_1" || !bytes.Contains(tc.Data, []byte(`"completed"`)) {
		t.Fatalf("turn.completed %s %s", tc.TurnID, tc.Data)
	}
	select {
	case l := <-f.lines:
		t.Fatalf("the adapters wrote %s besides the answer", l)
	default:
	}
}

// TestPauseRefusesInterruptInFlight: an interrupt still waiting for its
// acknowledgement cannot be handed over (its answer could not be matched
// after the exec); the adapter carries on and the interrupt completes.
func TestPauseRefusesInterruptInFlight(t *testing.T) {
	f, outW, _ := handoffFake(t)
	errc := make(chan error, 1)
	go func() { _, err := f.a.Interrupt(context.Background()); errc <- err }()
	m := f.read(t)
	if m["type"] != "control_request" {
		t.Fatalf("interrupt wrote %v", m)
	}
	if _, err := f.a.Pause(t.Context()); !errors.Is(err, provider.ErrRequestInFlight) {
		f.a.Resume()
		t.Fatalf("Pause with the interrupt unanswered: %v", err)
	}
	if _, err := outW.Write(line(t, map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
		"request_id": m["request_id"], "response": map[string]any{}}})); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("the adapter did not carry on after the refused pause: %v", err)
	}
	if _, err := outW.Write(line(t, map[string]any{"type": "result", "subtype": "error_during_execution", "usage": map[string]any{}})); err != nil {
		t.Fatal(err)
	}
	if tc := decodeData[event.TurnCompletedData](t, f.next(t, event.TurnCompleted)); tc.Status != event.StatusInterrupted {
		t.Fatalf("turn.completed %+v", tc)
	}
}

// TestHandoffStuckInterrupt: an interrupt the CLI acknowledged but whose
// turn has not ended is handed over armed: the old image's timer firing
// while paused does nothing (the journal was drained: a turn.completed
// there would be lost or doubled), and the adopted adapter arms it afresh
// and ends the turn interrupted when it fires, telling the host to stop
// the child.
func TestHandoffStuckInterrupt(t *testing.T) {
	f, outW, in := handoffFake(t)
	errc := make(chan error, 1)
	go func() { _, err := f.a.Interrupt(context.Background()); errc <- err }()
	m := f.read(t)
	if _, err := outW.Write(line(t, map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
		"request_id": m["request_id"], "response": map[string]any{}}})); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	p, err := f.a.Pause(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		outW.Close()
		f.a.Resume()
	})
	var st handoffState
	if err := json.Unmarshal(p.State, &st); err != nil || !st.Stuck || st.Turn == nil || !st.Turn.Interrupted {
		t.Fatalf("handed-over state %s (%v)", p.State, err)
	}
	f.a.mu.Lock()
	turn := f.a.turn
	f.a.mu.Unlock()
	f.a.onStuck(turn) // the old image's timer firing while paused
	for len(f.evs) > 0 {
		if d := <-f.evs; d.Type == event.TurnCompleted {
			t.Fatalf("the paused adapter ended the turn: %s", d.Data)
		}
	}

	outR := in.Out.(*os.File)
	if err := outR.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	evs := make(chan event.Draft, 1024)
	stuck := make(chan struct{})
	o2 := *in
	o2.Emit, o2.InterruptTimeout = func(d event.Draft) { evs <- d }, time.Millisecond
	o2.Stuck = func() { close(stuck) }
	a2, err := Adopt(o2, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		outW.Close()
		<-a2.Done()
	})
	select {
	case <-stuck:
	case <-time.After(10 * time.Second):
		t.Fatal("the adopted adapter never ended the stuck turn")
	}
	for d := range evs {
		if d.Type == event.TurnCompleted {
			if tc := decodeData[event.TurnCompletedData](t, d); d.TurnID != "t_1" || tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel {
				t.Fatalf("turn.completed %s %+v", d.TurnID, tc)
			}
			break
		}
	}
}
