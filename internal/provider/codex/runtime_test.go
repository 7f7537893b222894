package codex

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// fakeRuntime is a scripted shared provider process on two pipes.
type fakeRuntime struct {
	rt    *Runtime
	logs  *syncBuffer
	outW  io.WriteCloser
	lines chan []byte
	f     *fake // send/expect/reply helpers over the same pipes
}

func newFakeRuntime(t *testing.T) *fakeRuntime {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	fr := &fakeRuntime{logs: &syncBuffer{}, outW: outW, lines: make(chan []byte, 1024)}
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			fr.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	fr.rt = newRuntime(provider.RuntimeOptions{In: inW, Out: outR,
		Logger: slog.New(slog.NewTextHandler(fr.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	fr.f = &fake{outW: outW, lines: fr.lines, logs: fr.logs}
	t.Cleanup(func() {
		_ = outW.Close()
		<-fr.rt.Done()
		_ = inR.Close()
		<-pumped
	})
	return fr
}

// thread opens a thread with its own recorder and starts it as id.
func (fr *fakeRuntime) thread(t *testing.T, id string) (*Adapter, *recorder) {
	t.Helper()
	rec := newRecorder()
	a := fr.rt.Thread(provider.Options{Cwd: "/w", Emit: rec.emit, Logger: slog.New(slog.NewTextHandler(fr.logs, nil))}).(*Adapter)
	errc := make(chan error, 1)
	go func() { _, err := a.Start(testCtx(t)); errc <- err }()
	fr.f.reply(t, fr.f.expect(t, "thread/start"), map[string]any{"thread": map[string]any{"id": id}})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return a, rec
}

func (fr *fakeRuntime) turn(t *testing.T, a *Adapter, ours, theirs string) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- a.StartTurn(testCtx(t), ours, "hi") }()
	fr.f.reply(t, fr.f.expect(t, "turn/start"), map[string]any{"turn": map[string]any{"id": theirs, "status": "inProgress"}})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func deltas(evs []event.Draft) string {
	var b strings.Builder
	for _, d := range evs {
		if d.Type == event.MessageDelta {
			var dd event.DeltaData
			_ = json.Unmarshal(d.Data, &dd)
			b.WriteString(dd.Text)
			b.WriteString(";")
		}
	}
	return b.String()
}

func countType(evs []event.Draft, typ string) int {
	n := 0
	for _, d := range evs {
		if d.Type == typ {
			n++
		}
	}
	return n
}

// TestRuntimeDemultiplexes: two threads on one process, each with a turn:
// every event and approval reaches only the thread it names; an event of
// one thread tagged with the other's turn, and lines for a thread nobody
// is on, are anomalies delivered to nobody (a request among them is
// answered with an error, so the provider does not wait); a process-wide
// notification reaches both; request ids are one space.
func TestRuntimeDemultiplexes(t *testing.T) {
	fr := newFakeRuntime(t)
	f := fr.f
	hs := make(chan error, 1)
	go func() { hs <- fr.rt.Handshake(testCtx(t)) }()
	f.reply(t, f.expect(t, "initialize"), map[string]any{"userAgent": "fake"})
	f.expect(t, "initialized")
	if err := <-hs; err != nil {
		t.Fatal(err)
	}
	a, recA := fr.thread(t, "thr_A")
	b, recB := fr.thread(t, "thr_B")
	fr.turn(t, a, "t_a", "pa")
	fr.turn(t, b, "t_b", "pb")

	delta := func(thread, turn, text string) map[string]any {
		return map[string]any{"method": "item/agentMessage/delta",
			"params": map[string]any{"threadId": thread, "turnId": turn, "itemId": "i", "delta": text}}
	}
	f.send(t, delta("thr_A", "pa", "a1"))
	f.send(t, delta("thr_B", "pb", "b1"))
	f.send(t, delta("thr_A", "pb", "wrong-turn")) // B's turn tagged with A's thread
	f.send(t, delta("thr_Z", "pz", "nobody"))
	f.send(t, map[string]any{"id": 90, "method": "item/commandExecution/requestApproval",
		"params": map[string]any{"threadId": "thr_Z", "turnId": "pz", "itemId": "c"}})
	f.send(t, map[string]any{"method": "configWarning", "params": map[string]any{"summary": "process-wide"}})
	f.send(t, map[string]any{"id": 91, "method": "item/commandExecution/requestApproval",
		"params": map[string]any{"threadId": "thr_B", "turnId": "pb", "itemId": "c"}})
	f.send(t, delta("thr_B", "pb", "b2"))

	// The unroutable request is answered with an error.
	m := f.expect(t, "")
	if m["id"] != float64(90) || m["error"] == nil {
		t.Fatalf("unknown thread's request answered %v, want an error for id 90", m)
	}
	recB.waitFor(t, event.ApprovalRequested, "t_b")
	recB.waitFor(t, event.MessageDelta, "t_b")
	for _, tc := range []struct {
		name string
		th   *Adapter
		rec  *recorder
		turn string
		prov string
	}{{"A", a, recA, "t_a", "pa"}, {"B", b, recB, "t_b", "pb"}} {
		f.send(t, map[string]any{"method": "turn/completed",
			"params": map[string]any{"threadId": "thr_" + tc.name, "turn": map[string]any{"id": tc.prov, "status": "completed"}}})
		tc.rec.waitFor(t, event.TurnCompleted, tc.turn)
	}
	if got := deltas(recA.all()); got != "a1;" {
		t.Errorf("thread A's deltas %q, want only its own", got)
	}
	if got := deltas(recB.all()); got != "b1;b2;" {
		t.Errorf("thread B's deltas %q, want only its own", got)
	}
	if n := countType(recA.all(), event.ApprovalRequested); n != 0 {
		t.Errorf("thread A got %d approvals of thread B", n)
	}
	if n := countType(recB.all(), event.ApprovalResolved); n != 1 {
		t.Errorf("thread B's approval: %d resolved at turn end, want 1 (cancelled)", n)
	}
	for name, rec := range map[string]*recorder{"A": recA, "B": recB} {
		if n := countType(rec.all(), event.ProviderNotice); n != 1 {
			t.Errorf("thread %s: %d provider.notice, want the process-wide configWarning once", name, n)
		}
	}
	if n := fr.rt.Anomalies("unknown_thread"); n != 2 {
		t.Errorf("unknown_thread anomalies %d, want 2", n)
	}
	if !strings.Contains(fr.logs.String(), "event_outside_open_turn") {
		t.Errorf("the mis-tagged delta was not logged as an anomaly:\n%s", fr.logs.String())
	}
}

// TestRuntimeApprovalBelongsToItsThread: an approval is answerable only
// through the thread that asked; the answer goes back under its raw id.
func TestRuntimeApprovalBelongsToItsThread(t *testing.T) {
	fr := newFakeRuntime(t)
	f := fr.f
	go func() { _ = fr.rt.Handshake(testCtx(t)) }()
	f.reply(t, f.expect(t, "initialize"), map[string]any{})
	f.expect(t, "initialized")
	a, _ := fr.thread(t, "thr_A")
	b, recB := fr.thread(t, "thr_B")
	fr.turn(t, b, "t_b", "pb")
	f.send(t, map[string]any{"id": 7, "method": "item/commandExecution/requestApproval",
		"params": map[string]any{"threadId": "thr_B", "turnId": "pb", "itemId": "c"}})
	req := decode[event.ApprovalRequestedData](t, recB.waitFor(t, event.ApprovalRequested, "t_b")).RequestID
	if err := a.Respond(testCtx(t), req, Answer{Decision: DecisionApprove}); !errors.Is(err, ErrRequestNotFound) {
		t.Fatalf("thread A answered thread B's approval: %v", err)
	}
	if err := b.Respond(testCtx(t), req, Answer{Decision: DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	select {
	case line := <-fr.lines:
		_ = json.Unmarshal(line, &got)
	case <-time.After(waitLong):
		t.Fatal("no answer written")
	}
	if got["id"] != float64(7) {
		t.Fatalf("answer %v, want id 7", got)
	}
}

// TestRuntimeDetach: after Detach (thread/unsubscribe) nothing of the
// thread reaches it, quietly; the other thread goes on.
func TestRuntimeDetach(t *testing.T) {
	fr := newFakeRuntime(t)
	f := fr.f
	go func() { _ = fr.rt.Handshake(testCtx(t)) }()
	f.reply(t, f.expect(t, "initialize"), map[string]any{})
	f.expect(t, "initialized")
	a, recA := fr.thread(t, "thr_A")
	b, recB := fr.thread(t, "thr_B")
	fr.turn(t, b, "t_b", "pb")
	errc := make(chan error, 1)
	go func() { errc <- a.Detach(testCtx(t)) }()
	m := f.expect(t, "thread/unsubscribe")
	if p := m["params"].(map[string]any); p["threadId"] != "thr_A" {
		t.Fatalf("unsubscribe params %v", p)
	}
	f.reply(t, m, map[string]any{"status": "unsubscribed"})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	f.send(t, map[string]any{"method": "thread/tokenUsage/updated", "params": map[string]any{"threadId": "thr_A", "turnId": "x"}})
	f.send(t, map[string]any{"method": "turn/completed",
		"params": map[string]any{"threadId": "thr_B", "turn": map[string]any{"id": "pb", "status": "completed"}}})
	recB.waitFor(t, event.TurnCompleted, "t_b")
	if n := len(recA.all()); n != 0 {
		t.Fatalf("detached thread got %d events", n)
	}
	if n := fr.rt.Anomalies("unknown_thread"); n != 0 {
		t.Fatalf("a detached thread's late line counted as an anomaly (%d)", n)
	}
	_ = b
}

// TestRuntimeOnEcho: one real echo process serves five threads with a
// turn running on each at once; every reply is in its own thread's
// events only; detaching one leaves the others' turns alone.
func TestRuntimeOnEcho(t *testing.T) {
	p := startEcho(t, t.TempDir())
	rt := newRuntime(provider.RuntimeOptions{In: p.in, Out: p.out, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() {
		_ = p.in.Close()
		<-rt.Done()
	})
	ctx := testCtx(t)
	if err := rt.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 5
	ths := make([]provider.Thread, n)
	recs := make([]*recorder, n)
	for i := range ths {
		recs[i] = newRecorder()
		ths[i] = rt.Thread(provider.Options{Cwd: t.TempDir(), Emit: recs[i].emit})
		if _, err := ths[i].Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Thread 0 runs a long turn; the others a short one each, at once.
	if err := ths[0].StartTurn(ctx, "t_0", "long /sleep 600000"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if err := ths[i].StartTurn(ctx, fmt.Sprintf("t_%d", i), fmt.Sprintf("reply %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < n; i++ {
		recs[i].waitFor(t, event.TurnCompleted, fmt.Sprintf("t_%d", i))
		if got, want := turnText(recs[i].all(), fmt.Sprintf("t_%d", i)), fmt.Sprintf("echo: reply %d", i); got != want {
			t.Errorf("thread %d's reply %q, want %q", i, got, want)
		}
		if strings.Count(deltas(recs[i].all()), "reply") > 1 || strings.Contains(deltas(recs[i].all()), "long") {
			t.Errorf("thread %d got another thread's deltas: %q", i, deltas(recs[i].all()))
		}
	}
	if err := ths[1].Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if !ths[0].Busy() {
		t.Fatal("detaching thread 1 ended thread 0's turn")
	}
	if _, err := ths[0].Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	recs[0].waitFor(t, event.TurnCompleted, "t_0")
	if got := deltas(recs[0].all()); got != "" {
		t.Errorf("thread 0 got deltas %q", got)
	}
}

// TestRuntimeResumeBindsFirst: codex announces a resumed thread
// (thread/status/changed) before it answers thread/resume: the line
// reaches the resuming thread, not the unknown-thread anomaly; a second
// session resuming a thread another session of the runtime is on is
// refused (ErrThreadTaken) without asking the provider, and the thread's
// lines stay with the first.
func TestRuntimeResumeBindsFirst(t *testing.T) {
	fr := newFakeRuntime(t)
	f := fr.f
	go func() { _ = fr.rt.Handshake(testCtx(t)) }()
	f.reply(t, f.expect(t, "initialize"), map[string]any{})
	f.expect(t, "initialized")
	resume := func(rec *recorder) (*Adapter, chan error) {
		a := fr.rt.Thread(provider.Options{Cwd: "/w", ThreadID: "thr_R", Emit: rec.emit,
			Logger: slog.New(slog.NewTextHandler(fr.logs, nil))}).(*Adapter)
		errc := make(chan error, 1)
		go func() { _, err := a.Start(testCtx(t)); errc <- err }()
		return a, errc
	}
	recA := newRecorder()
	a, errA := resume(recA)
	m := f.expect(t, "thread/resume")
	f.send(t, map[string]any{"method": "thread/status/changed", "params": map[string]any{"threadId": "thr_R", "status": map[string]any{"type": "idle"}}})
	f.reply(t, m, map[string]any{"thread": map[string]any{"id": "thr_R"}})
	if err := <-errA; err != nil {
		t.Fatal(err)
	}
	if n := fr.rt.Anomalies("unknown_thread"); n != 0 {
		t.Fatalf("the resumed thread's own announcement counted as unknown (%d):\n%s", n, fr.logs.String())
	}
	recB := newRecorder()
	_, errB := resume(recB)
	if err := <-errB; !errors.Is(err, ErrThreadTaken) {
		t.Fatalf("second resume of thr_R: %v, want ErrThreadTaken", err)
	}
	fr.thread(t, "thr_next") // the provider's next request is this thread/start, not a resume
	fr.turn(t, a, "t_a", "pa")
	f.send(t, map[string]any{"method": "item/agentMessage/delta",
		"params": map[string]any{"threadId": "thr_R", "turnId": "pa", "itemId": "i", "delta": "mine"}})
	recA.waitFor(t, event.MessageDelta, "t_a")
	if got := deltas(recB.all()); got != "" {
		t.Fatalf("the refused session got %q", got)
	}
}

// TestRuntimeMisTaggedApproval: an approval request that names one
// thread but another thread's turn is an anomaly: neither session is
// asked, and the provider gets an answer (it does not wait forever).
func TestRuntimeMisTaggedApproval(t *testing.T) {
	fr := newFakeRuntime(t)
	f := fr.f
	go func() { _ = fr.rt.Handshake(testCtx(t)) }()
	f.reply(t, f.expect(t, "initialize"), map[string]any{})
	f.expect(t, "initialized")
	a, recA := fr.thread(t, "thr_A")
	b, recB := fr.thread(t, "thr_B")
	fr.turn(t, a, "t_a", "pa")
	fr.turn(t, b, "t_b", "pb")
	f.send(t, map[string]any{"id": 77, "method": "item/commandExecution/requestApproval",
		"params": map[string]any{"threadId": "thr_A", "turnId": "pb", "itemId": "c"}})
	m := f.expect(t, "")
	if m["id"] != float64(77) {
		t.Fatalf("answer %v, want one for id 77", m)
	}
	for name, rec := range map[string]*recorder{"A": recA, "B": recB} {
		if n := countType(rec.all(), event.ApprovalRequested); n != 0 {
			t.Errorf("thread %s was asked the mis-tagged approval (%d)", name, n)
		}
	}
	if !strings.Contains(fr.logs.String(), "anomaly") {
		t.Errorf("the mis-tagged approval was not logged as an anomaly:\n%s", fr.logs.String())
	}
}
