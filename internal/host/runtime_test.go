package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/eviction"
)

// sharedSteps is a detaching session's teardown on a shared runtime.
var sharedSteps = []string{StepDrainSession, StepInterruptTurn, StepKillCommands, StepDetachThread, StepCloseSink, StepDiscardSink, StepReleaseLease, StepForget}

// runtimeSteps is a runtime's own teardown.
var runtimeSteps = []string{StepStopRuntime, StepDrainRuntime, StepForgetRuntime}

func (f *fixture) send(id, text string) string {
	f.t.Helper()
	r, err := f.h.Send(context.Background(), api.SendParams{SessionID: id, Text: text})
	if err != nil {
		f.t.Fatalf("send %s: %v", id, err)
	}
	return r.TurnID
}

func (f *fixture) info(id string) api.SessionInfo {
	f.t.Helper()
	si, err := f.h.Get(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return si
}

// replyOf is the text of turn's deltas in id's journal.
func (f *fixture) replyOf(id, turn string) string {
	f.t.Helper()
	evs, _, _, err := f.j.Read(id, 0, 4096)
	if err != nil {
		f.t.Fatal(err)
	}
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == event.MessageDelta && ev.TurnID == turn {
			b.WriteString(data(ev)["text"].(string))
		}
	}
	return b.String()
}

func (f *fixture) eventOf(id, typ string) event.Event {
	f.t.Helper()
	evs, _, _, err := f.j.Read(id, 0, 4096)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == typ {
			return ev
		}
	}
	f.t.Fatalf("journal of %s has no %s: %v", id, typ, f.types(id))
	return event.Event{}
}

// last is the journal's last event of typ.
func (f *fixture) last(id, typ string) event.Event {
	f.t.Helper()
	evs, _, _, err := f.j.Read(id, 0, 4096)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	f.t.Fatalf("journal of %s has no %s", id, typ)
	return event.Event{}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestSharedSessionsOneRuntime: sessions of a shared profile are threads
// of one process: one pid and runtimeId, turns side by side, each reply
// only in its own journal; lease.acquired and provider.started name the
// runtime.
func TestSharedSessionsOneRuntime(t *testing.T) {
	f := newFixture(t)
	const n = 4
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.create("shared")
		f.hold(ids[i], "w", "c1")
	}
	rt := f.info(ids[0]).RuntimeID
	pid := f.info(ids[0]).PID
	if !strings.HasPrefix(rt, "r_") || pid == 0 {
		t.Fatalf("runtime %q pid %d", rt, pid)
	}
	turns := make([]string, n)
	for i, id := range ids {
		si := f.info(id)
		if si.RuntimeID != rt || si.PID != pid || si.Account != defaultAccount {
			t.Fatalf("session %d on runtime %s pid %d account %q, want %s pid %d", i, si.RuntimeID, si.PID, si.Account, rt, pid)
		}
		if d := data(f.eventOf(id, event.LeaseAcquired)); d["runtimeId"] != rt {
			t.Fatalf("lease.acquired %v", d)
		}
		if d := data(f.eventOf(id, event.ProviderStarted)); d["runtimeId"] != rt || d["pid"] != float64(pid) {
			t.Fatalf("provider.started %v", d)
		}
		turns[i] = f.send(id, fmt.Sprintf("hello %d", i))
	}
	for i, id := range ids {
		f.waitFor(id, 0, isType(event.TurnCompleted))
		if got, want := f.replyOf(id, turns[i]), fmt.Sprintf("echo: hello %d", i); got != want {
			t.Errorf("session %d's reply %q, want %q", i, got, want)
		}
		for j, other := range turns {
			if j != i && f.replyOf(id, other) != "" {
				t.Errorf("session %d's journal has session %d's reply", i, j)
			}
		}
	}
}

// TestSharedCloseLeavesOthers: closing one session of a runtime runs the
// detaching list in order (its open turn interrupted, provider.detached,
// session.ended, lease.released), leaves the process running and another
// session's turn untouched: it completes normally afterwards.
func TestSharedCloseLeavesOthers(t *testing.T) {
	f := newFixture(t)
	a, b := f.create("shared"), f.create("shared")
	f.hold(a, "w", "c1")
	f.hold(b, "w", "c1")
	pid := f.info(a).PID
	ta := f.send(a, "wait for me /approve")
	req := data(f.waitFor(a, 0, isType(event.ApprovalRequested)))["requestId"].(string)
	tb := f.send(b, "long /sleep 600000")
	f.waitFor(b, 0, isType(event.TurnStarted))

	res, err := f.h.Close(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Steps {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, sharedSteps) {
		t.Fatalf("steps %v, want %v", names, sharedSteps)
	}
	if !alive(pid) {
		t.Fatal("closing one session stopped the shared runtime")
	}
	f.tail(b, event.TurnCompleted, event.ProviderDetached, event.SessionEnded, event.LeaseReleased)
	if d := data(f.eventOf(b, event.TurnCompleted)); d["status"] != "interrupted" || d["reason"] != "closed" {
		t.Fatalf("b's turn.completed %v", d)
	}
	if d := data(f.eventOf(b, event.ProviderDetached)); d["runtimeId"] != f.info(a).RuntimeID || d["threadId"] == "" {
		t.Fatalf("provider.detached %v", d)
	}
	if slices.Contains(f.types(b), event.ProviderExited) {
		t.Fatalf("a detached session journaled provider.exited: %v", f.types(b))
	}
	_ = tb
	if err := f.h.Respond(context.Background(), api.RespondParams{SessionID: a, RequestID: req, Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	done := f.waitFor(a, 0, isType(event.TurnCompleted))
	if d := data(done); d["status"] != "completed" {
		t.Fatalf("a's turn after closing b: %v", d)
	}
	if got := f.replyOf(a, ta); got != "echo: wait for me /approve" {
		t.Fatalf("a's reply %q", got)
	}
}

// TestRuntimeReleaseClock: the runtime stays while any session is on
// it; its own clock, armed when the last one left, stops it; the next
// hold starts a new one.
func TestRuntimeReleaseClock(t *testing.T) {
	f := newFixture(t)
	a, b := f.create("shared"), f.create("shared")
	f.hold(a, "w", "c1")
	f.hold(b, "w", "c1")
	first := f.info(a)
	if _, err := f.h.Close(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(2 * idle)
	if !alive(first.PID) || f.info(b).RuntimeID != first.RuntimeID {
		t.Fatal("the runtime stopped while a session was held on it")
	}
	if _, err := f.h.Release(context.Background(), "c1", api.ReleaseParams{SessionID: b, HolderID: "w"}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(idle) // b's release clock: b detaches, the runtime's clock starts
	if f.h.lookup(b) != nil {
		t.Fatal("b still loaded after its release clock")
	}
	if !alive(first.PID) {
		t.Fatal("the runtime stopped with its last session, before its own clock")
	}
	f.clk.Advance(idle) // the runtime's clock
	if alive(first.PID) {
		t.Fatal("the runtime still runs after its release clock")
	}
	f.hold(a, "w", "c1")
	if si := f.info(a); si.RuntimeID == first.RuntimeID || si.PID == first.PID {
		t.Fatalf("re-hold reused the stopped runtime: %+v", si)
	}
}

// TestSharedRuntimeDies: SIGKILL of the shared process: every open turn
// ends interrupted {provider_exited}, each session gets its tail with the
// runtime's id, and the next hold starts a new runtime.
func TestSharedRuntimeDies(t *testing.T) {
	f := newFixture(t)
	a, b := f.create("shared"), f.create("shared")
	f.hold(a, "w", "c1")
	f.hold(b, "w", "c1")
	first := f.info(a)
	f.send(a, "long /sleep 600000")
	f.send(b, "long /sleep 600000")
	f.waitFor(a, 0, isType(event.TurnStarted))
	f.waitFor(b, 0, isType(event.TurnStarted))
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, b} {
		f.waitFor(id, 0, isType(event.LeaseReleased))
		f.tail(id, event.TurnCompleted, event.ProviderExited, event.SessionEnded, event.LeaseReleased)
		if d := data(f.eventOf(id, event.TurnCompleted)); d["status"] != "interrupted" || d["reason"] != "provider_exited" {
			t.Fatalf("turn.completed %v", d)
		}
		if d := data(f.eventOf(id, event.ProviderExited)); d["runtimeId"] != first.RuntimeID || d["signal"] != "SIGKILL" || d["expected"] != false {
			t.Fatalf("provider.exited %v", d)
		}
		if d := data(f.eventOf(id, event.SessionEnded)); d["reason"] != "provider_exited" {
			t.Fatalf("session.ended %v", d)
		}
	}
	f.hold(a, "w", "c1")
	if si := f.info(a); si.RuntimeID == first.RuntimeID || si.PID == first.PID || si.State != "live" {
		t.Fatalf("after the runtime died: %+v", si)
	}
}

// TestThreadNotLoadedTwice: a thread a runtime being recycled still has
// loaded (its process lingers: the writer lock is held until it exits)
// is not loaded into a new runtime before the old one is gone: the hold
// waits, then resumes it.
func TestThreadNotLoadedTwice(t *testing.T) {
	f := newFixture(t)
	a := f.create("sharedstubborn")
	f.hold(a, "w", "c1")
	f.send(a, "first")
	f.waitFor(a, 0, isType(event.TurnCompleted))
	first := f.info(a)
	if _, err := f.h.Close(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	evicting := make(chan struct{})
	f.h.mu.Lock()
	var once sync.Once
	f.h.runtimeEvicting = func(string) { once.Do(func() { close(evicting) }) }
	f.h.mu.Unlock()
	stopped := make(chan struct{})
	go func() { defer close(stopped); f.clk.Advance(idle) }() // the runtime's clock: its ladder runs to SIGKILL
	<-evicting
	if !alive(first.PID) {
		t.Fatal("the old runtime is gone already: nothing tested")
	}
	r := f.hold(a, "w", "c1")
	<-stopped
	if r.PID == first.PID || alive(first.PID) {
		t.Fatalf("hold %+v with the old runtime pid %d alive=%v", r, first.PID, alive(first.PID))
	}
	if d := data(f.last(a, event.ProviderStarted)); d["resumed"] != true || d["threadId"] != first.ThreadID {
		t.Fatalf("the new runtime's provider.started %v, want the thread %s resumed", d, first.ThreadID)
	}
}

// TestThreadBusy: a thread loaded by a runtime that still runs and is
// not the session's is refused thread_busy, naming that runtime.
func TestThreadBusy(t *testing.T) {
	f := newFixture(t)
	a := f.create("shared")
	f.hold(a, "w", "c1")
	si := f.info(a)
	e := f.h.lookup(a)
	f.h.mu.Lock()
	rt := e.rt
	f.h.mu.Unlock()
	other := &sharedRuntime{id: "r_OTHER", key: runtimeKey{"shared", "x"}}
	if err := f.h.awaitThreadFree(context.Background(), si.ThreadID, rt); err != nil {
		t.Fatalf("its own runtime: %v", err)
	}
	err := f.h.awaitThreadFree(context.Background(), si.ThreadID, other)
	wantKind(t, err, api.KindThreadBusy)
	var ae *api.Error
	if errors.As(err, &ae); ae.Data["runtimeId"] != rt.id {
		t.Fatalf("data %v", ae.Data)
	}
}

// TestSharedPlansOrder: the two lists, as data.
func TestSharedPlansOrder(t *testing.T) {
	f := newFixture(t)
	a := f.create("shared")
	f.hold(a, "w", "c1")
	e := f.h.lookup(a)
	names := func(steps []eviction.Step) []string {
		var out []string
		for _, s := range steps {
			out = append(out, s.Name)
		}
		return out
	}
	if got := names(f.h.sharedPlan(e, evictClosed)); !slices.Equal(got, sharedSteps) {
		t.Fatalf("session list %v, want %v", got, sharedSteps)
	}
	if got := stepNames(f.h.runtimePlan(e.rt)); !slices.Equal(got, runtimeSteps) {
		t.Fatalf("runtime list %v, want %v", got, runtimeSteps)
	}
}

// TestSharedRuntimeQuiesce: a live upgrade freezes a shared runtime like
// a per-session child: the handoff has the runtime (its pid, its loaded
// threads) and each bound session naming it with its thread's state; an
// idle runtime is handed over with its release clock, not stopped, and
// an abandoned upgrade re-arms that clock (the runtime stops on it).
func TestSharedRuntimeQuiesce(t *testing.T) {
	f := newFixture(t)
	a, b := f.create("shared"), f.create("shared")
	f.hold(a, "w", "c1")
	f.hold(b, "w", "c1")
	si := f.info(a)
	q, err := f.h.Quiesce(context.Background())
	if err != nil {
		t.Fatalf("quiesce with sessions on a shared runtime: %v", err)
	}
	if len(q.Runtimes) != 1 || q.Runtimes[0].ID != si.RuntimeID || q.Runtimes[0].Child.PID != si.PID || len(q.Runtimes[0].Loaded) != 2 {
		t.Fatalf("handed-over runtimes %+v, want %s pid %d with 2 threads", q.Runtimes, si.RuntimeID, si.PID)
	}
	if len(q.Sessions) != 2 {
		t.Fatalf("handed-over sessions %+v", q.Sessions)
	}
	for _, s := range q.Sessions {
		if s.RuntimeID != si.RuntimeID || s.ThreadID == "" || !strings.Contains(string(s.Adapter.State), s.ThreadID) {
			t.Fatalf("handed-over session %+v", s)
		}
	}
	q.Abandon()
	for _, id := range []string{a, b} {
		if _, err := f.h.Close(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	q, err = f.h.Quiesce(context.Background())
	if err != nil {
		t.Fatalf("quiesce with an idle runtime: %v", err)
	}
	if len(q.Runtimes) != 1 || q.Runtimes[0].ReleaseAt == nil || len(q.Sessions) != 0 {
		t.Fatalf("idle runtime handed over as %+v (sessions %+v), want it with its release clock", q.Runtimes, q.Sessions)
	}
	f.clk.Advance(2 * idle) // frozen: the clock is stopped
	if !alive(si.PID) {
		t.Fatal("the idle runtime stopped during the quiesce")
	}
	q.Abandon()
	f.clk.Advance(idle) // re-armed by Abandon
	if alive(si.PID) {
		t.Fatal("the idle runtime still runs after its re-armed release clock")
	}
}
