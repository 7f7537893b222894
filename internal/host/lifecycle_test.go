package host

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/proc"
)

var sixSteps = []string{StepStopChild, StepDrain, StepCloseSink, StepDiscardSink, StepReleaseLease, StepForget}

func TestHoldSendReleaseIdleEviction(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	hr := f.hold(id, "desktop:w1", "c1")
	if hr.Fence != 1 || hr.PID == 0 || hr.ThreadID == "" || hr.HoldToken == "" {
		t.Fatalf("hold result %+v", hr)
	}
	if lr, _ := f.h.leases.Get(id); lr.Status != lease.Live || lr.Fence != 1 {
		t.Fatalf("lease after hold %+v", lr)
	}
	sr, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	done := f.waitFor(id, 0, isType(event.TurnCompleted))
	if done.TurnID != sr.TurnID || data(done)["status"] != "completed" {
		t.Fatalf("turn.completed %+v", done)
	}
	child := f.lookupChild(t, id)

	rr, err := f.h.Release(ctx, "c1", api.ReleaseParams{SessionID: id, HolderID: "desktop:w1"})
	if err != nil || !rr.Released || len(rr.Holders) != 0 || rr.ReleaseAt == nil {
		t.Fatalf("release %+v %v", rr, err)
	}
	if f.h.lookup(id) == nil {
		t.Fatal("evicted before the release clock fired")
	}
	f.clk.Advance(idle)
	if f.h.lookup(id) != nil {
		t.Fatal("still in the map after the release clock fired")
	}
	select {
	case <-child.Exited():
	default:
		t.Fatal("child still running after eviction")
	}
	if lr, _ := f.h.leases.Get(id); lr.Status != lease.Released {
		t.Fatalf("lease after eviction %+v", lr)
	}
	f.tail(id, event.ProviderExited, event.SessionEnded, event.LeaseReleased)
	px := f.waitFor(id, 0, isType(event.ProviderExited))
	if d := data(px); d["code"] != 0.0 || d["signal"] != nil || d["expected"] != true || d["tree"] != "exited" {
		t.Fatalf("cooperative exit journaled as %s", px.Data)
	}
	ended := f.waitFor(id, 0, isType(event.SessionEnded))
	if data(ended)["reason"] != event.ReasonEvicted {
		t.Fatalf("session.ended %s", ended.Data)
	}
	si, _ := f.h.Get(ctx, id)
	if si.State != "stored" || si.LastExit == nil || si.LastExit.Root != "exited" {
		t.Fatalf("info after eviction %+v", si)
	}
}

// lookupChild returns the live child of a session.
func (f *fixture) lookupChild(t *testing.T, id string) *proc.Child {
	t.Helper()
	e := f.h.lookup(id)
	if e == nil {
		t.Fatal("no map entry")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.child
}

func TestReholdResumesThreadAtHigherFence(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	first := f.hold(id, "h", "c1")
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "one"}); err != nil {
		t.Fatal(err)
	}
	f.waitFor(id, 0, isType(event.TurnCompleted))
	res, err := f.h.Close(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Steps {
		names = append(names, s.Name)
		if !s.OK {
			t.Fatalf("step %s not ok", s.Name)
		}
	}
	if !slices.Equal(names, sixSteps) {
		t.Fatalf("steps %v, want %v", names, sixSteps)
	}
	second := f.hold(id, "h", "c1")
	if second.ThreadID != first.ThreadID || second.Fence <= first.Fence || second.PID == first.PID {
		t.Fatalf("re-hold %+v after %+v", second, first)
	}
	started := f.waitFor(id, 0, func(ev event.Event) bool {
		return ev.Type == event.ProviderStarted && data(ev)["resumed"] == true
	})
	if data(started)["threadId"] != first.ThreadID {
		t.Fatalf("provider.started %s", started.Data)
	}
}

func TestCloseStoredSessionIsNoop(t *testing.T) {
	f := newFixture(t)
	id := f.create("echo")
	res, err := f.h.Close(context.Background(), id)
	if err != nil || len(res.Steps) != 0 {
		t.Fatalf("close of stored session: %+v %v", res, err)
	}
	_, err = f.h.Close(context.Background(), "s_doesnotexist")
	wantKind(t, err, api.KindSessionNotFound)
}

func TestCrashMidTurnRunsTheSameSteps(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	e := f.h.lookup(id)
	sr, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/crash"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor(id, 0, isType(event.LeaseReleased))
	e.mu.Lock() // the watcher's teardown holds the session lock to its end
	//lint:ignore SA2001 taking the lock was the point: it waits for that teardown
	e.mu.Unlock()
	f.tail(id, event.TurnCompleted, event.ProviderExited, event.SessionEnded, event.LeaseReleased)
	tc := f.waitFor(id, 0, isType(event.TurnCompleted))
	if tc.TurnID != sr.TurnID || data(tc)["status"] != "interrupted" || data(tc)["reason"] != event.ReasonProviderExited {
		t.Fatalf("turn.completed %+v %s", tc, tc.Data)
	}
	px := f.waitFor(id, 0, isType(event.ProviderExited))
	if data(px)["expected"] != false {
		t.Fatalf("provider.exited %s", px.Data)
	}
	f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.MessageDelta }) // written before the crash, kept
	if f.h.lookup(id) != nil {
		t.Fatal("crashed session still in the map")
	}
	// The held session can be held again.
	f.hold(id, "h", "c1")
}

func TestExitDuringStartFailsHold(t *testing.T) {
	f := newFixture(t)
	id := f.create("failstart")
	_, err := f.h.Hold(context.Background(), "c1", api.HoldParams{SessionID: id, HolderID: "h"})
	wantKind(t, err, api.KindProviderFailed)
	ae := err.(*api.Error)
	if tail, _ := ae.Data["stderrTail"].(string); tail == "" {
		t.Fatalf("no stderr tail in %+v", ae.Data)
	}
	if f.h.lookup(id) != nil {
		t.Fatal("failed start left a map entry")
	}
	if lr, _ := f.h.leases.Get(id); lr.Status != lease.Released {
		t.Fatalf("failed start left lease %+v", lr)
	}
}

func TestCloseStubbornChildAndDetachedDescendant(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("stubborn")
	f.hold(id, "h", "c1")
	if _, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/orphan"}); err != nil {
		t.Fatal(err)
	}
	f.waitFor(id, 0, isType(event.TurnCompleted))
	if _, err := f.h.Close(ctx, id); err != nil {
		t.Fatal(err)
	}
	px := f.waitFor(id, 0, isType(event.ProviderExited))
	if d := data(px); d["root"] != "exited" || d["tree"] != "exited" || d["signal"] != "SIGKILL" {
		t.Fatalf("provider.exited %s", px.Data)
	}
	if left, _ := proc.ScanTagged(f.st.StateID); len(left) > 0 {
		t.Fatalf("tagged processes after close: %v", left)
	}
}

func TestExitUnprovenKeepsSessionAndRetries(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	real := f.h.stopChild
	f.h.stopChild = func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict {
		return proc.Verdict{Root: proc.Unverifiable, Tree: proc.Unverifiable}
	}
	_, err := f.h.Close(ctx, id)
	wantKind(t, err, api.KindExitUnproven)
	if d := err.(*api.Error).Data; d["step"] != StepStopChild {
		t.Fatalf("data %+v", d)
	}
	if f.h.lookup(id) == nil {
		t.Fatal("an unproven exit forgot the session")
	}
	if lr, _ := f.h.leases.Get(id); lr.Status != lease.Live {
		t.Fatalf("an unproven exit released the lease: %+v", lr)
	}
	if si, _ := f.h.Get(ctx, id); si.State != "live" {
		t.Fatalf("state after failed close %q", si.State)
	}
	f.h.stopChild = real
	if _, err := f.h.Close(ctx, id); err != nil {
		t.Fatalf("retried close: %v", err)
	}
	if f.h.lookup(id) != nil {
		t.Fatal("retried close did not forget the session")
	}
	f.tail(id, event.ProviderExited, event.SessionEnded, event.LeaseReleased)
}

// The provider env is pinned into the record at create: a later change of
// the profile (another CODEX_HOME) does not move an existing session.
func TestProviderEnvPinnedAtCreate(t *testing.T) {
	f := newFixture(t)
	p := f.h.o.Providers["echo"]
	p.Env = maps.Clone(p.Env)
	p.Env["CODEX_HOME"] = "/accounts/first"
	f.h.o.Providers["echo"] = p
	id := f.create("echo")
	p.Env = maps.Clone(p.Env)
	p.Env["CODEX_HOME"] = "/accounts/second"
	f.h.o.Providers["echo"] = p
	hr := f.hold(id, "h", "c1")
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", hr.PID))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range strings.Split(string(env), "\x00") {
		if strings.HasPrefix(kv, "CODEX_HOME=") {
			got = append(got, kv)
		}
	}
	if len(got) == 0 || got[len(got)-1] != "CODEX_HOME=/accounts/first" {
		t.Fatalf("child env CODEX_HOME %v, want the pinned /accounts/first last", got)
	}
}

// Shutdown evicts every live session through the same steps, side by side.
func TestShutdownEvictsEverySession(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var ids []string
	for range 3 {
		id := f.create("stubborn")
		f.hold(id, "h", "c1")
		ids = append(ids, id)
	}
	if err := f.h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		f.tail(id, event.ProviderExited, event.SessionEnded, event.LeaseReleased)
		ended := f.waitFor(id, 0, isType(event.SessionEnded))
		if data(ended)["reason"] != event.ReasonShutdown {
			t.Fatalf("session.ended %s", ended.Data)
		}
	}
	if left, _ := proc.ScanTagged(f.st.StateID); len(left) > 0 {
		t.Fatalf("tagged processes after shutdown: %v", left)
	}
}
