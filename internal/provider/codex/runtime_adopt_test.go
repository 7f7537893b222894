package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// deltaBytes is the text of a recorder's message deltas, concatenated.
func deltaBytes(evs []event.Draft) string {
	var b strings.Builder
	for _, d := range evs {
		if d.Type == event.MessageDelta {
			var dd event.DeltaData
			_ = json.Unmarshal(d.Data, &dd)
			b.WriteString(dd.Text)
		}
	}
	return b.String()
}

func numberedText(n, width int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%0*d", width, i)
	}
	return b.String()
}

// handOver plays a live upgrade of rt in one process: rt is paused, the
// bound threads' states taken, and a runtime adopted over the same pipes
// (the read deadline the pause set cleared, as a new image's fresh file
// has none); adopt installs the threads before Start. Cleanup ends the
// provider's stdout (end) and the old, parked reader once the new one
// has seen that end.
func handOver(t *testing.T, rt *Runtime, end func(), logs io.Writer,
	adopt func(nr provider.AdoptedRuntime, states map[provider.Thread]json.RawMessage)) *Runtime {
	t.Helper()
	paused, err := rt.Pause(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	states := map[provider.Thread]json.RawMessage{}
	for _, a := range rt.adapters() {
		if a == rt.control {
			continue
		}
		st, err := rt.ThreadState(a)
		if err != nil {
			t.Fatal(err)
		}
		states[a] = st
	}
	out, ok := rt.o.Out.(*os.File)
	if !ok {
		t.Fatalf("stdout %T", rt.o.Out)
	}
	if err := out.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	nr, err := AdoptRuntime(provider.RuntimeOptions{In: rt.o.In, Out: out,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, paused)
	if err != nil {
		t.Fatal(err)
	}
	// The host reads its store and leases between building the runtime
	// and installing its threads: a reader started too early reads the
	// waiting lines meanwhile. No signal says "it did not start", so the
	// test gives it that time (a window, not a synchronisation: the
	// assertions never depend on it when the reader waits for Start).
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline) && nr.(*Runtime).Anomalies("unknown_thread") == 0; {
		runtime.Gosched()
	}
	adopt(nr, states)
	nr.Start()
	t.Cleanup(func() {
		end()
		<-nr.Done()
		rt.Resume() // the old reader sees the pipe's end too
	})
	return nr.(*Runtime)
}

// TestAdoptedRuntimeLosesNoLine: two threads of one echo process stream
// numbered floods while the runtime is handed over (the pipe is full at
// the pause: lines are waiting when the adopted runtime is built). Every
// delta of each flood reaches its own thread exactly once, in order,
// split between the old adapter and the adopted one; none reaches the
// other thread, none is dropped as an unknown thread's (the reader
// starts only once both threads are installed).
func TestAdoptedRuntimeLosesNoLine(t *testing.T) {
	p := startEcho(t, t.TempDir())
	logs := &syncBuffer{}
	rt := newRuntime(provider.RuntimeOptions{In: p.in, Out: p.out, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { _ = p.in.Close() })
	ctx := testCtx(t)
	if err := rt.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	const n, floodN, width = 3, 20000, 8
	old := make([]*recorder, n)
	cwd := t.TempDir()
	for i := range old {
		old[i] = newRecorder()
		th := rt.Thread(provider.Options{Cwd: cwd, Emit: old[i].emit})
		if _, err := th.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := th.StartTurn(ctx, fmt.Sprintf("t_%d", i), fmt.Sprintf("/flood %d %d /numbered", floodN+i, width)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range old {
		old[i].waitFor(t, event.MessageDelta, fmt.Sprintf("t_%d", i))
	}
	recs := make([]*recorder, n)
	nr := handOver(t, rt, func() { _ = p.in.Close() }, logs, func(nr provider.AdoptedRuntime, states map[provider.Thread]json.RawMessage) {
		for _, st := range states {
			var hs handoffState
			if err := json.Unmarshal(st, &hs); err != nil || hs.Turn == nil {
				t.Fatalf("thread state %s (%v)", st, err)
			}
			var i int
			if _, err := fmt.Sscanf(hs.Turn.Ours, "t_%d", &i); err != nil || i < 0 || i >= n {
				t.Fatalf("thread state names turn %q", hs.Turn.Ours)
			}
			recs[i] = newRecorder()
			if _, err := nr.AdoptThread(provider.Options{Cwd: cwd, ThreadID: hs.ThreadID, Emit: recs[i].emit}, st); err != nil {
				t.Fatal(err)
			}
		}
	})
	for i := range recs {
		recs[i].waitFor(t, event.TurnCompleted, fmt.Sprintf("t_%d", i))
		if got, want := deltaBytes(old[i].all())+deltaBytes(recs[i].all()), numberedText(floodN+i, width); got != want {
			t.Errorf("thread %d: its flood arrived as %d bytes (%d before the handover, %d after), want %d",
				i, len(got), len(deltaBytes(old[i].all())), len(deltaBytes(recs[i].all())), len(want))
		}
		if c := countType(recs[i].all(), event.TurnCompleted); c != 1 {
			t.Errorf("thread %d: %d turn.completed after the handover", i, c)
		}
	}
	if k := nr.Anomalies("unknown_thread"); k != 0 {
		t.Errorf("%d lines routed to no thread after the handover:\n%s", k, logs.String())
	}
}

// TestAdoptedRuntimeKeepsRequestIDs: a request the old image gave up on
// (its caller's context ended) is still in the provider's hands across
// the handover, and its answer comes late. The adopted runtime goes on in
// the same request-id space: no new request reuses an id the provider
// saw, so the late answer is an anomaly delivered to nobody and each new
// caller gets its own answer.
func TestAdoptedRuntimeKeepsRequestIDs(t *testing.T) {
	fr := pausableRuntime(t)
	f := fr.f
	seen := map[float64]bool{}
	expect := func(method string) map[string]any {
		t.Helper()
		m := f.expect(t, method)
		id, _ := m["id"].(float64)
		seen[id] = true
		return m
	}
	go func() { _ = fr.rt.Handshake(testCtx(t)) }()
	f.reply(t, expect("initialize"), map[string]any{"userAgent": "fake"})
	f.expect(t, "initialized")
	start := func(id string) *Adapter {
		t.Helper()
		a := fr.rt.Thread(provider.Options{Cwd: "/w", Emit: newRecorder().emit}).(*Adapter)
		errc := make(chan error, 1)
		go func() { _, err := a.Start(testCtx(t)); errc <- err }()
		f.reply(t, expect("thread/start"), map[string]any{"thread": map[string]any{"id": id}})
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := start("thr_A")
	start("thr_B")
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() { _, err := a.request(ctx, "test/slow", nil, nil); errc <- err }()
	late := expect("test/slow")
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the abandoned request succeeded")
	}
	var nb *Adapter
	handOver(t, fr.rt, func() { _ = fr.outW.Close() }, fr.logs, func(nr provider.AdoptedRuntime, states map[provider.Thread]json.RawMessage) {
		for _, st := range states {
			th, err := nr.AdoptThread(provider.Options{Cwd: "/w", Emit: newRecorder().emit}, st)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(st), `"threadId":"thr_B"`) {
				nb = th.(*Adapter)
			}
		}
	})
	for i := range len(seen) {
		type res struct {
			r   json.RawMessage
			err error
		}
		ch := make(chan res, 1)
		go func() { r, err := nb.request(testCtx(t), "test/ping", map[string]any{"n": i}, nil); ch <- res{r, err} }()
		m := f.expect(t, "test/ping")
		id, _ := m["id"].(float64)
		if seen[id] {
			t.Errorf("request %d after the handover has id %v, which the provider saw before it (%v)", i, id, seen)
		}
		if id == late["id"] {
			f.reply(t, late, map[string]any{"who": "the abandoned request"})
		}
		f.reply(t, m, map[string]any{"who": fmt.Sprint("ping ", i)})
		r := <-ch
		if r.err != nil || string(r.r) != fmt.Sprintf(`{"who":"ping %d"}`, i) {
			t.Fatalf("request %d after the handover got %s (%v)", i, r.r, r.err)
		}
	}
	f.reply(t, late, map[string]any{"who": "the abandoned request"})
}

// TestAdoptedRuntimeThreadNobodyHas: the handed-over runtime names a
// thread no adopted session installs (its session was not adopted, or a
// hostile handoff). Its lines are dropped quietly (not unknown-thread
// anomalies), a server request of it is answered with an error (the
// provider does not wait on it) and the other thread goes on untouched.
func TestAdoptedRuntimeThreadNobodyHas(t *testing.T) {
	fr := pausableRuntime(t)
	f := fr.f
	go func() { _ = fr.rt.Handshake(testCtx(t)) }()
	f.reply(t, f.expect(t, "initialize"), map[string]any{"userAgent": "fake"})
	f.expect(t, "initialized")
	a, _ := fr.thread(t, "thr_A")
	fr.thread(t, "thr_X")
	fr.turn(t, a, "t_a", "pa")
	rec := newRecorder()
	nr := handOver(t, fr.rt, func() { _ = fr.outW.Close() }, fr.logs, func(nr provider.AdoptedRuntime, states map[provider.Thread]json.RawMessage) {
		for _, st := range states {
			if strings.Contains(string(st), `"threadId":"thr_A"`) {
				if _, err := nr.AdoptThread(provider.Options{Cwd: "/w", Emit: rec.emit}, st); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	f.send(t, map[string]any{"method": "item/agentMessage/delta", "params": map[string]any{"threadId": "thr_X", "turnId": "px", "itemId": "i", "delta": "X's"}})
	f.send(t, map[string]any{"id": 77, "method": "item/commandExecution/requestApproval", "params": map[string]any{"threadId": "thr_X", "turnId": "px", "itemId": "c"}})
	refusal := f.expect(t, "")
	if refusal["id"] != float64(77) || refusal["error"] == nil {
		t.Fatalf("the request of a thread nobody has was answered %v", refusal)
	}
	f.send(t, map[string]any{"method": "item/agentMessage/delta", "params": map[string]any{"threadId": "thr_A", "turnId": "pa", "itemId": "i", "delta": "A's"}})
	f.send(t, map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "thr_A", "turn": map[string]any{"id": "pa", "status": "completed"}}})
	rec.waitFor(t, event.TurnCompleted, "t_a")
	if got := deltas(rec.all()); got != "A's;" {
		t.Errorf("thread A's deltas after the handover: %q", got)
	}
	if k := nr.Anomalies("unknown_thread"); k != 0 {
		t.Errorf("%d unknown-thread anomalies for a handed-over thread nobody installed", k)
	}
}
