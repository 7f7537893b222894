package host

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestSwitchBackRecyclesStaleRuntime: a→b→a on a shared profile: a's
// runtime still has the thread's old copy loaded, so the thread never
// resumes there: that runtime (serving nobody else) is recycled and the
// session resumes in a new one, with b's turns.
func TestSwitchBackRecyclesStaleRuntime(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acctshared", "a")
	f.hold(id, "h", "c1")
	f.turnDone(id, "on a")
	rtA := f.info(id).RuntimeID
	f.switchTo(id, "b", "")
	f.turnDone(id, "on b")
	f.switchTo(id, "a", "")
	si := f.info(id)
	if si.Account != "a" || si.RuntimeID == rtA {
		t.Fatalf("back on a: runtime %s (the stale one was %s)", si.RuntimeID, rtA)
	}
	if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=2") {
		t.Fatalf("reply %q", reply)
	}
}

// TestSwitchBackBusyStaleRuntime: the stale runtime still serves another
// session: "now" is thread_busy (the session stays on b); "idle" queues
// the switch {reason: thread_busy} and, that runtime running no turn,
// recycles it at once: the other session resumes its thread in the new
// process, and the switch is applied there.
func TestSwitchBackBusyStaleRuntime(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acctshared", "a")
	other := f.createOn("acctshared", "a")
	f.hold(id, "h", "c1")
	f.hold(other, "h", "c1")
	f.turnDone(id, "on a")
	f.turnDone(other, "other on a")
	rtA := f.info(other).RuntimeID
	f.switchTo(id, "b", "")
	f.turnDone(id, "on b")
	_, err := f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: "a", When: api.SwitchWhenNow})
	wantKind(t, err, api.KindThreadBusy)
	if n := strings.Count(err.Error(), errStaleBusy.Error()); n != 1 {
		t.Fatalf("the answer says why %d times: %v", n, err) // the wire message is err.Error()
	}
	if si := f.info(id); si.Account != "b" || si.State != "live" {
		t.Fatalf("after a refused switch: %+v", si)
	}
	if d := data(f.last(id, event.AccountSwitchFailed)); d["to"] != "a" {
		t.Fatalf("switch_failed %v", d)
	}
	sw := f.last(id, event.AccountSwitched)
	if r := f.switchTo(id, "a", ""); !r.Queued || r.Switched || r.Account != "a" {
		t.Fatalf("switch back = %+v", r)
	}
	if d := data(f.last(id, event.AccountSwitchQueued)); d["to"] != "a" || d["reason"] != "thread_busy" {
		t.Fatalf("switch_queued %v", d)
	}
	if d := data(f.waitFor(id, sw.Seq, isType(event.AccountSwitched))); d["to"] != "a" || d["continuity"] != "native" {
		t.Fatalf("account.switched %v", d)
	}
	si, so := f.info(id), f.info(other)
	if si.Account != "a" || so.State != "live" || so.RuntimeID == rtA || si.RuntimeID != so.RuntimeID {
		t.Fatalf("after the recycle: %+v / other %+v (old runtime %s)", si, so, rtA)
	}
	if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=2") {
		t.Fatalf("reply %q", reply)
	}
	if _, reply := f.turnDone(other, "/history"); !strings.HasSuffix(reply, "history=1") {
		t.Fatalf("other's reply %q", reply)
	}
}

// TestSwitchBackWaitsForStaleRuntimeTurn: the stale runtime's other
// session has a turn running: the queued switch waits for its
// turn.completed, then the runtime is recycled and the switch applied.
func TestSwitchBackWaitsForStaleRuntimeTurn(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acctshared", "a")
	other := f.createOn("acctshared", "a")
	f.hold(id, "h", "c1")
	f.hold(other, "h", "c1")
	f.turnDone(id, "on a")
	f.switchTo(id, "b", "")
	running := f.send(other, "/approve x")
	req := f.waitFor(other, 0, isType(event.ApprovalRequested))
	if r := f.switchTo(id, "a", ""); !r.Queued {
		t.Fatalf("switch back = %+v", r)
	}
	if si := f.info(id); si.Account != "b" {
		t.Fatalf("applied while the other turn runs: %+v", si)
	}
	f.approveOpen(other, req)
	if d := data(f.waitFor(other, 0, func(ev event.Event) bool { return ev.Type == event.TurnCompleted && ev.TurnID == running })); d["status"] != "completed" {
		t.Fatalf("the other session's turn ended %v: the recycle did not wait for it", d)
	}
	f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.AccountSwitched && data(ev)["to"] == "a" })
	if d := data(f.last(other, event.SessionEnded)); d["reason"] != "runtime_recycle" {
		t.Fatalf("the other session's session.ended %v", d)
	}
	if si := f.info(id); si.Account != "a" || f.info(other).State != "live" {
		t.Fatalf("after the recycle: %+v / %+v", si, f.info(other))
	}
	if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=1") {
		t.Fatalf("reply %q", reply)
	}
}

// TestSwitchRaces: a switch racing a close, and two switches racing
// each other, end in one consistent state: the session on one account,
// its journal's last account.switched naming it, nothing left running.
func TestSwitchRaces(t *testing.T) {
	for _, profile := range []string{"acct", "acctshared"} {
		t.Run(profile+"/close", func(t *testing.T) {
			f := newFixture(t)
			id := f.createOn(profile, "a")
			f.hold(id, "h", "c1")
			f.turnDone(id, "x")
			var wg sync.WaitGroup
			var serr, cerr error
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, serr = f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: "b"})
			}()
			go func() { defer wg.Done(); _, cerr = f.h.Close(context.Background(), id) }()
			wg.Wait()
			if serr != nil || cerr != nil {
				t.Fatalf("switch %v close %v", serr, cerr)
			}
			if si := f.info(id); si.Account != "b" {
				t.Fatalf("account %q", si.Account)
			}
			f.hold(id, "h", "c1")
			if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=1") {
				t.Fatalf("reply %q", reply)
			}
		})
		t.Run(profile+"/switch", func(t *testing.T) {
			f := newFixture(t)
			id := f.createOn(profile, "a")
			f.hold(id, "h", "c1")
			f.turnDone(id, "x")
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, to := range []string{"b", "a"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: to})
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil && api.KindOf(err) != api.KindThreadBusy {
					t.Fatalf("switch: %v", err)
				}
			}
			si := f.info(id)
			if si.State != "live" || (si.Account != "a" && si.Account != "b") {
				t.Fatalf("after racing switches: %+v", si)
			}
			if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=1") {
				t.Fatalf("reply %q", reply)
			}
		})
	}
}

// TestSwitchRacesEviction: the release clock fires while a switch runs:
// whichever wins, the session ends on the new account with its thread.
func TestSwitchRacesEviction(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acct", "a")
	f.hold(id, "h", "c1")
	f.turnDone(id, "x")
	if _, err := f.h.Release(context.Background(), "c1", api.ReleaseParams{SessionID: id, HolderID: "h"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: "b"})
		done <- err
	}()
	f.clk.Advance(idle)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(idle) // a successor armed its own clock: it goes too
	if si := f.info(id); si.Account != "b" {
		t.Fatalf("account %q", si.Account)
	}
	f.hold(id, "h", "c1")
	if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=1") {
		t.Fatalf("reply %q", reply)
	}
}

// TestSwitchAfterCrash: the session's process exited on its own (its
// teardown owed or done): the switch is a stored session's, and the next
// hold runs on the new account with the thread.
func TestSwitchAfterCrash(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acct", "a")
	f.hold(id, "h", "c1")
	f.turnDone(id, "x")
	f.send(id, "/crash")
	f.waitFor(id, 0, isType(event.ProviderExited))
	if r := f.switchTo(id, "b", ""); !r.Switched || r.Account != "b" {
		t.Fatalf("switch = %+v", r)
	}
	f.hold(id, "h", "c1")
	if si := f.info(id); si.Account != "b" {
		t.Fatalf("account %q", si.Account)
	}
	if _, reply := f.turnDone(id, "/history"); !strings.Contains(reply, "history=") {
		t.Fatalf("reply %q", reply)
	}
}

// TestSwitchBackRecycleAtShutdown: a switch queued behind a stale
// runtime whose other session runs a turn: a shutdown meanwhile ends
// whole (the recycle waiting gives up), the queued switch kept in the
// record for the next start.
func TestSwitchBackRecycleAtShutdown(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acctshared", "a")
	other := f.createOn("acctshared", "a")
	f.hold(id, "h", "c1")
	f.hold(other, "h", "c1")
	f.turnDone(id, "on a")
	f.switchTo(id, "b", "")
	f.send(other, "/approve x")
	f.waitFor(other, 0, isType(event.ApprovalRequested))
	if r := f.switchTo(id, "a", ""); !r.Queued {
		t.Fatalf("switch back = %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := f.h.record(id)
	if err != nil || rec.PendingSwitch == nil || rec.PendingSwitch.To != "a" || rec.Account != "b" {
		t.Fatalf("record after the shutdown: %+v %v", rec, err)
	}
}
