package acp

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// adoptRuntime pauses s's runtime and builds the next image's over the
// same pipes from its state and each thread's; s.rt and each g.a are the
// adopted ones after.
func (s *sharedAgent) adopt(t *testing.T, gs []*agent) {
	t.Helper()
	p, err := s.rt.Pause(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	states := make([][]byte, len(gs))
	for i, g := range gs {
		if states[i], err = s.rt.ThreadState(g.a); err != nil {
			t.Fatal(err)
		}
	}
	old := s.rt
	t.Cleanup(old.Resume) // the old reader, parked as the exec would leave it, sees EOF at the end
	out := old.o.Out.(*os.File)
	if err := out.SetReadDeadline(time.Time{}); err != nil { // the new image's descriptor has no deadline
		t.Fatal(err)
	}
	ar, err := AdoptRuntime(old.o, p)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gs {
		th, err := ar.AdoptThread(g.opts, states[i])
		if err != nil {
			t.Fatal(err)
		}
		g.a = adapterOf(th)
	}
	ar.Start()
	s.rt = ar.(*Runtime)
}

// A live upgrade of a shared runtime with one session's permission
// pending and another's turn streaming: nothing is written to the agent;
// the adopted threads have their sessions and turns; the permission is
// answered with the agent's own id and its turn ends with the
// session/prompt sent before the upgrade; the streaming turn goes on and
// is cancelled in the new image; an idle session starts a turn there with
// a request id the agent never saw.
func TestRuntimeHandoffMidTurn(t *testing.T) {
	s := startFakeRuntime(t, "")
	gs := s.threads(t, 3)
	a, b, c := gs[0], gs[1], gs[2]
	ap := a.waitApproval(t, "work")
	if err := b.a.StartTurn(t.Context(), "t_1", "slow"); err != nil {
		t.Fatal(err)
	}
	b.until(t, event.MessageDelta)
	sent := len(s.g.sentLines())
	s.adopt(t, gs)
	if n := len(s.g.sentLines()); n != sent {
		t.Fatalf("the handover wrote %d lines to the agent", n-sent)
	}
	for i, g := range gs {
		if want := i < 2; g.a.Busy() != want || g.a.ThreadID() != []string{"sess-1", "sess-2", "sess-3"}[i] {
			t.Fatalf("adopted thread %d: session %q busy %v", i, g.a.ThreadID(), g.a.Busy())
		}
	}
	if err := a.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: provider.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	if got := answerOf(t, a.until(t, event.TurnCompleted)); got != "outcome=yes" {
		t.Fatalf("session a after the upgrade: %q", got)
	}
	b.until(t, event.MessageDelta) // b streams on into the new image
	if _, err := b.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	if tc := data[event.TurnCompletedData](t, last(b.until(t, event.TurnCompleted))); tc.Reason != event.ReasonUserCancel {
		t.Fatalf("session b: %+v", tc)
	}
	if got := answerOf(t, c.turn(t, "t_1", "hello")); got != "Hello" {
		t.Fatalf("session c in the new image: %q", got)
	}
	seen := map[any]int{}
	for _, m := range s.g.sentLines() {
		if id, ok := m["id"]; ok && m["method"] != nil {
			seen[id]++
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("request id %v sent %d times across the upgrade", id, n)
		}
	}
}

// Pause refuses while a request other than a turn's session/prompt waits
// for its answer (a session/new the agent does not answer): the runtime
// is resumed and goes on.
func TestRuntimePauseRefusesRequestInFlight(t *testing.T) {
	s := startFakeRuntime(t, "nonew")
	g := &agent{evs: make(chan event.Draft, 64), parent: s.g}
	g.opts = provider.Options{Cwd: t.TempDir(), Emit: func(d event.Draft) { g.evs <- d }, RequestTimeout: time.Minute}
	g.a = adapterOf(s.rt.Thread(g.opts))
	errc := make(chan error, 1)
	go func() { _, err := g.a.Start(t.Context()); errc <- err }()
	for len(s.g.sentMethod("session/new")) == 0 {
		<-s.g.wrote
	}
	_, err := s.rt.Pause(t.Context())
	if !errors.Is(err, provider.ErrRequestInFlight) || !strings.Contains(err.Error(), "session/new") {
		t.Fatalf("pause with session/new unanswered: %v", err)
	}
	s.rt.mu.Lock()
	paused := s.rt.pause != nil
	s.rt.mu.Unlock()
	if paused {
		t.Fatal("a refused pause left the runtime paused")
	}
	g.a.BeginStop()
	if err := <-errc; !errors.Is(err, provider.ErrStopping) {
		t.Fatalf("session/new after BeginStop: %v", err)
	}
}
