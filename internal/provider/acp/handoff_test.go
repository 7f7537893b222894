package acp

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// adopt pauses g's adapter and builds the next image's over the same
// pipes from its state; g.a is the adopted one after.
func (g *agent) adopt(t *testing.T) {
	t.Helper()
	p, err := g.a.Pause(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	old := g.a
	t.Cleanup(old.Resume) // the old reader, parked as the exec would leave it, sees EOF at the end
	// The new image wraps the inherited descriptor afresh; here the same
	// *os.File stands in for it, without the pause's deadline.
	if err := g.opts.Out.(*os.File).SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	pa, err := Adopt(g.opts, p)
	if err != nil {
		t.Fatal(err)
	}
	g.a = pa.(*Adapter)
}

// A live upgrade in the middle of a turn whose permission is pending: the
// adopted adapter has the session and the turn, answers the permission
// with the agent's own id, waits for the session/prompt sent before the
// upgrade and ends the turn with it (the command item and the text
// completed as one); the handover writes nothing to the agent.
func TestHandoffMidTurn(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	ap := g.waitApproval(t, "work")
	sent := len(g.sentLines())
	g.adopt(t)
	if len(g.sentLines()) != sent {
		t.Fatal("the handover wrote to the agent")
	}
	if g.a.ThreadID() != "sess-1" || !g.a.Busy() {
		t.Fatalf("adopted: thread %q busy %v", g.a.ThreadID(), g.a.Busy())
	}
	if err := g.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	evs := g.until(t, event.TurnCompleted)
	if got := answerOf(t, evs); got != "outcome=yes" {
		t.Fatalf("agent got %q", got)
	}
	var cmd event.ItemData
	for _, d := range of(evs, event.ItemCompleted) {
		if c := data[event.ItemData](t, d); c.ItemID == "call-1" {
			cmd = c
		}
	}
	if p, _ := cmd.Payload.(map[string]any); cmd.Status != event.ItemCompletedStatus || p["command"] != "touch done" || p["output"] != "out1\nout2\n" {
		t.Fatalf("command item after the handover %+v", cmd)
	}
	if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); evs[len(evs)-1].TurnID != "t_1" || tc.Status != event.StatusCompleted {
		t.Fatalf("turn.completed %s %+v", evs[len(evs)-1].TurnID, tc)
	}
	if evs := g.turn(t, "t_2", "hello"); answerOf(t, evs) != "Hello" {
		t.Fatalf("next turn %s", types(evs))
	}
}

// A cancel sent before the upgrade: the adopted adapter ends the turn
// interrupted (user_cancel) when the agent answers the prompt.
func TestHandoffAfterCancel(t *testing.T) {
	g := startAgent(t, "", nil)
	g.start(t)
	g.waitApproval(t, "work")
	if _, err := g.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.adopt(t)
	evs := g.until(t, event.TurnCompleted)
	if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusInterrupted || tc.Reason != event.ReasonUserCancel {
		t.Fatalf("turn.completed %+v", tc)
	}
}

// Pause refuses while a request other than the turn's prompt waits.
func TestPauseRefusesRequestInFlight(t *testing.T) {
	g := startAgent(t, "silent", nil)
	errc := make(chan error, 1)
	go func() { _, err := g.a.Start(t.Context()); errc <- err }()
	for len(g.sentMethod("initialize")) == 0 {
		<-g.wrote
	}
	if _, err := g.a.Pause(t.Context()); !errors.Is(err, provider.ErrRequestInFlight) {
		t.Fatalf("pause with initialize in flight: %v", err)
	}
	g.a.BeginStop()
	<-errc
}
