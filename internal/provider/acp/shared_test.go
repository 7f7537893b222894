package acp

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// sharedAgent is one ACP agent process serving many sessions through a
// Runtime; every line either side writes is recorded and checked against
// the ACP schema (the agent's recorder, g).
type sharedAgent struct {
	g  *agent
	rt *Runtime
}

// startRuntime runs cmd and builds a runtime over it, handshake done.
func startRuntime(t *testing.T, cmd *exec.Cmd) *sharedAgent {
	t.Helper()
	s := &sharedAgent{g: &agent{check: conformance(t), cmd: cmd, wrote: make(chan struct{}, 1)}}
	in, out := s.g.spawn(t, func() { s.rt.BeginStop() }, func() <-chan struct{} { return s.rt.Done() })
	s.rt = newRuntime(provider.RuntimeOptions{In: in, Out: out, RequestTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(s.g, &slog.HandlerOptions{Level: slog.LevelDebug}))}, Profile{})
	if err := s.rt.Handshake(t.Context()); err != nil {
		t.Fatalf("handshake: %v\nlog:\n%s", err, s.g.log())
	}
	return s
}

// startFakeRuntime is startRuntime over the fake agent in mode.
func startFakeRuntime(t *testing.T, mode string) *sharedAgent {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeEnv+"="+mode)
	dieWithTest(cmd)
	return startRuntime(t, cmd)
}

// thread opens a session (loading thread when set) on the runtime and
// starts it; its events go to its own channel.
func (s *sharedAgent) thread(t *testing.T, thread string) *agent {
	t.Helper()
	g := &agent{evs: make(chan event.Draft, 1<<12), parent: s.g}
	g.opts = provider.Options{Cwd: t.TempDir(), ThreadID: thread, Emit: func(d event.Draft) { g.evs <- d },
		Logger: slog.New(slog.NewTextHandler(s.g, &slog.HandlerOptions{Level: slog.LevelDebug})), RequestTimeout: 10 * time.Second,
		RequestIDPrefix: fmt.Sprintf("f%d-", len(s.rt.threads())+1)}
	g.a = adapterOf(s.rt.Thread(g.opts))
	g.start(t)
	return g
}

// threads opens n sessions.
func (s *sharedAgent) threads(t *testing.T, n int) []*agent {
	t.Helper()
	out := make([]*agent, n)
	for i := range out {
		out[i] = s.thread(t, "")
	}
	return out
}

// quiet fails if g got any event.
func quiet(t *testing.T, g *agent, what string) {
	t.Helper()
	select {
	case d := <-g.evs:
		t.Errorf("%s: got %s %s", what, d.Type, d.Data)
	default:
	}
}

// Five sessions in one agent process: one initialize, five session/new,
// five prompts running at once (the agent holds every reply until all
// five arrived: a runtime that serialised its sessions' turns would hang),
// each reply only in its own session's events; request ids are one space.
func TestRuntimeFiveSessionsConcurrentTurns(t *testing.T) {
	s := startFakeRuntime(t, "")
	const n = 5
	gs := s.threads(t, n)
	ids := map[string]bool{}
	for _, g := range gs {
		ids[g.a.ThreadID()] = true
	}
	if len(ids) != n || len(s.g.sentMethod("initialize")) != 1 || len(s.g.sentMethod("session/new")) != n {
		t.Fatalf("sessions %v, initialize ×%d, session/new ×%d", ids, len(s.g.sentMethod("initialize")), len(s.g.sentMethod("session/new")))
	}
	for i, g := range gs {
		if err := g.a.StartTurn(t.Context(), "t_1", fmt.Sprintf("gather %d tag%d", n, i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, g := range gs {
		evs := g.until(t, event.TurnCompleted)
		if got, want := answerOf(t, evs), fmt.Sprintf("reply-tag%d", i); got != want {
			t.Errorf("session %d (%s): answer %q, want %q; events %s", i, g.a.ThreadID(), got, want, types(evs))
		}
		if tc := data[event.TurnCompletedData](t, evs[len(evs)-1]); tc.Status != event.StatusCompleted {
			t.Errorf("session %d: %+v", i, tc)
		}
	}
	for i, g := range gs {
		quiet(t, g, fmt.Sprintf("session %d after its turn", i))
	}
	seen := map[any]bool{}
	for _, m := range s.g.sentLines() {
		if id, ok := m["id"]; ok && m["method"] != nil {
			if seen[id] {
				t.Errorf("request id %v used twice on one connection", id)
			}
			seen[id] = true
		}
	}
	if s.rt.Anomalies("unknown_session") != 0 || strings.Contains(s.g.log(), "level=WARN") {
		t.Errorf("anomalies for ordinary traffic:\n%s", s.g.log())
	}
}

// A permission request of one session stays open while another session's
// turn streams and completes; approved, its turn goes on and completes.
func TestRuntimePermissionWhileAnotherStreams(t *testing.T) {
	s := startFakeRuntime(t, "")
	gs := s.threads(t, 2)
	a, b := gs[0], gs[1]
	ap := a.waitApproval(t, "work")
	evs := b.turn(t, "t_1", "hello")
	if answerOf(t, evs) != "Hello" || len(of(evs, event.ApprovalRequested)) != 0 {
		t.Fatalf("session b: %s %q", types(evs), answerOf(t, evs))
	}
	if !a.a.Busy() || b.a.Busy() {
		t.Fatalf("busy: a %v b %v", a.a.Busy(), b.a.Busy())
	}
	if err := a.a.Respond(t.Context(), ap.RequestID, provider.Answer{Decision: provider.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	evs = a.until(t, event.TurnCompleted)
	if got := answerOf(t, evs); got != "outcome=yes" {
		t.Fatalf("session a: %q; %s", got, types(evs))
	}
	quiet(t, b, "session b after a's turn")
}

// Detaching one session mid-turn ends only its turn: the runtime's other
// sessions stream on, start new turns, and the process keeps running;
// the detached session's late lines reach nobody (no anomaly). An agent
// that serves session/close gets it for that session alone (then a load of
// it on the same process works); one that does not gets nothing.
func TestRuntimeDetachOneOthersGoOn(t *testing.T) {
	for _, mode := range []string{"", "noclose"} {
		t.Run("mode="+mode, func(t *testing.T) { detachOne(t, mode) })
	}
}

func detachOne(t *testing.T, mode string) {
	s := startFakeRuntime(t, mode)
	gs := s.threads(t, 3)
	for _, g := range gs[:2] {
		if err := g.a.StartTurn(t.Context(), "t_1", "slow"); err != nil {
			t.Fatal(err)
		}
		g.until(t, event.MessageDelta)
	}
	a, b, c := gs[0], gs[1], gs[2]
	a.a.Silence()
	if _, err := a.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.a.Detach(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.a.Done():
	default:
		t.Fatal("a detached thread's Done is open")
	}
	for range 3 { // b streams on after a left
		b.until(t, event.MessageDelta)
	}
	if evs := c.turn(t, "t_1", "hello"); answerOf(t, evs) != "Hello" {
		t.Fatalf("session c after a detached: %s", types(evs))
	}
	if _, err := b.a.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	if tc := data[event.TurnCompletedData](t, last(b.until(t, event.TurnCompleted))); tc.Reason != event.ReasonUserCancel {
		t.Fatalf("b: %+v", tc)
	}
	select {
	case <-s.rt.Done():
		t.Fatal("the runtime ended when one session detached")
	default:
	}
	if s.rt.Anomalies("unknown_session") != 0 {
		t.Errorf("a detached session's late lines were anomalies:\n%s", s.g.log())
	}
	closed := s.g.sentMethod("session/close")
	switch {
	case mode == "noclose" && len(closed) != 0:
		t.Fatalf("session/close sent to an agent without sessionCapabilities.close: %v", closed)
	case mode == "" && (len(closed) != 1 || closed[0]["sessionId"] != a.a.ThreadID()):
		t.Fatalf("session/close sent %v, want one for %s", closed, a.a.ThreadID())
	}
	again := s.thread(t, a.a.ThreadID()) // loaded again into the same process
	if evs := again.turn(t, "t_2", "hello"); answerOf(t, evs) != "Hello" {
		t.Fatalf("the detached session loaded again: %s", types(evs))
	}
}

func last(ds []event.Draft) event.Draft { return ds[len(ds)-1] }

// The agent killed mid-turn on two sessions: each thread's Done closes
// with its open message completed (the host journals the turn's end), the
// runtime's Done closes, and a thread opened afterwards is done at once.
func TestRuntimeKilledMidTurn(t *testing.T) {
	s := startFakeRuntime(t, "")
	gs := s.threads(t, 2)
	for _, g := range gs {
		if err := g.a.StartTurn(t.Context(), "t_1", "slow"); err != nil {
			t.Fatal(err)
		}
		g.until(t, event.MessageDelta)
	}
	if err := s.g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.rt.Done()
	for i, g := range gs {
		<-g.a.Done()
		evs := g.until(t, event.MessageCompleted)
		if n := len(of(evs, event.TurnCompleted)); n != 0 {
			t.Errorf("session %d: the adapter ended the turn itself: %s", i, types(evs))
		}
		if _, err := g.a.Interrupt(t.Context()); err == nil {
			continue // the cancel may have been written before the pipe closed
		}
	}
	late := s.rt.Thread(provider.Options{})
	<-late.Done()
}

// A hostile agent: during a turn of session a it tags an update with
// session b's id (b has no turn: dropped there, never a's), an update and
// a permission request with a session nobody is on (logged anomalies,
// delivered to nobody; the request is answered with an error).
func TestRuntimeUpdateForAnotherOrUnknownSession(t *testing.T) {
	s := startFakeRuntime(t, "")
	s.g.lax = false
	gs := s.threads(t, 2)
	a, b := gs[0], gs[1]
	evs := a.turn(t, "t_1", "cross "+b.a.ThreadID())
	if got := answerOf(t, evs); got != "mine;nobody-perm=-32602" {
		t.Fatalf("session a's answer %q; events %s", got, types(evs))
	}
	if n := len(of(evs, event.ApprovalRequested)); n != 0 {
		t.Fatalf("a permission of no session reached a: %s", types(evs))
	}
	quiet(t, b, "session b (its id was used by a's turn)")
	if n := s.rt.Anomalies("unknown_session"); n != 2 {
		t.Errorf("unknown_session anomalies %d, want 2\n%s", n, s.g.log())
	}
	if !strings.Contains(s.g.log(), "update_outside_turn") {
		t.Errorf("b's adapter did not log the update tagged with its id:\n%s", s.g.log())
	}
}

// One ACP session is served to one thread of a runtime: a load of a
// session another thread is on, and an agent answering session/new with a
// sessionId a thread already has, fail that Start (ErrSessionTaken) and
// leave the first thread its session.
func TestRuntimeSessionServedOnce(t *testing.T) {
	for _, mode := range []string{"", "samenew"} {
		t.Run("mode="+mode, func(t *testing.T) {
			s := startFakeRuntime(t, mode)
			a := s.thread(t, "")
			reuse := a.a.ThreadID() // the load of the same session
			if mode == "samenew" {
				reuse = "" // a fresh session the agent names like a's
			}
			g := &agent{evs: make(chan event.Draft, 64), parent: s.g}
			g.opts = provider.Options{Cwd: t.TempDir(), ThreadID: reuse, Emit: func(d event.Draft) { g.evs <- d }, RequestTimeout: 10 * time.Second}
			g.a = adapterOf(s.rt.Thread(g.opts))
			if _, err := g.a.Start(t.Context()); !errors.Is(err, ErrSessionTaken) {
				t.Fatalf("second start on %s: %v", a.a.ThreadID(), err)
			}
			if evs := a.turn(t, "t_1", "hello"); answerOf(t, evs) != "Hello" {
				t.Fatalf("the first thread after the refused one: %s", types(evs))
			}
			quiet(t, g, "the refused thread")
		})
	}
}

// An update of a new session written before the agent answers its
// session/new (Copilot CLI does this) is that session's, not an unknown
// session's; an update held meanwhile for a session no answer names is
// logged as an unknown session's once the session/new is answered.
func TestRuntimeUpdateBeforeSessionNewAnswer(t *testing.T) {
	s := startFakeRuntime(t, "early")
	gs := s.threads(t, 2)
	if evs := gs[1].turn(t, "t_1", "hello"); answerOf(t, evs) != "Hello" {
		t.Fatalf("a session after early updates: %s", types(evs))
	}
	log := s.g.log()
	if n := s.rt.Anomalies("unknown_session"); n != 2 || strings.Count(log, "session_id=ghost") != 2 || strings.Contains(log, "session_id=sess-") {
		t.Fatalf("unknown_session ×%d, want 2 (ghost's only):\n%s", n, log)
	}
}
