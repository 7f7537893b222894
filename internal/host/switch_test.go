package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// approveOpen answers the pending approval of id's open turn.
func (f *fixture) approveOpen(id string, req event.Event) {
	f.t.Helper()
	reqID, _ := data(req)["requestId"].(string)
	if err := f.h.Respond(context.Background(), api.RespondParams{SessionID: id, RequestID: reqID, Decision: "approve"}); err != nil {
		f.t.Fatal(err)
	}
}

// TestSwitchQueued: a switch asked for while a turn runs is queued (now
// is turn_running), a later one replaces it, and it is applied right
// after the turn's turn.completed, before anything else.
func TestSwitchQueued(t *testing.T) {
	for _, profile := range []string{"acct", "acctshared"} {
		t.Run(profile, func(t *testing.T) {
			f := newFixture(t)
			id := f.createOn(profile, "a")
			f.hold(id, "h", "c1")
			tid := f.send(id, "/approve first")
			req := f.waitFor(id, 0, isType(event.ApprovalRequested))
			_, err := f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: "b", When: "now"})
			wantKind(t, err, api.KindTurnRunning)
			if r := f.switchTo(id, "gone", ""); !r.Queued || r.Switched || r.Account != "gone" {
				t.Fatalf("queue = %+v", r)
			}
			if r := f.switchTo(id, "b", ""); !r.Queued || r.Account != "b" { // replaces the queued one
				t.Fatalf("requeue = %+v", r)
			}
			if a := f.info(id).Account; a != "a" {
				t.Fatalf("account %q while the turn runs", a)
			}
			f.approveOpen(id, req)
			sw := f.waitFor(id, 0, isType(event.AccountSwitched))
			done := f.eventOf(id, event.TurnCompleted)
			if done.TurnID != tid || done.Seq > sw.Seq {
				t.Fatalf("switched at %d, turn.completed at %d", sw.Seq, done.Seq)
			}
			if d := data(sw); d["from"] != "a" || d["to"] != "b" || d["continuity"] != "native" {
				t.Fatalf("account.switched %v", d)
			}
			q := f.last(id, event.AccountSwitchQueued)
			if d := data(q); d["from"] != "a" || d["to"] != "b" {
				t.Fatalf("last account.switch_queued %v", d)
			}
			if si := f.info(id); si.Account != "b" {
				t.Fatalf("account %q", si.Account)
			}
			if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=1") {
				t.Fatalf("reply %q", reply)
			}
		})
	}
}

// TestSwitchQueuedCancelled: switching to the current account cancels a
// queued switch.
func TestSwitchQueuedCancelled(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acct", "a")
	f.hold(id, "h", "c1")
	f.send(id, "/approve x")
	req := f.waitFor(id, 0, isType(event.ApprovalRequested))
	f.switchTo(id, "b", "")
	if r := f.switchTo(id, "a", ""); r.Queued || r.Switched || r.Account != "a" {
		t.Fatalf("cancel = %+v", r)
	}
	f.approveOpen(id, req)
	f.waitFor(id, 0, isType(event.TurnCompleted))
	f.turnDone(id, "after") // a send takes the session lock after any afterTurn
	if si := f.info(id); si.Account != "a" {
		t.Fatalf("account %q", si.Account)
	}
	for _, typ := range f.types(id) {
		if typ == event.AccountSwitched {
			t.Fatal("a cancelled switch was applied")
		}
	}
}

// TestSwitchQueuedAppliedBeforeSend: a send that takes the session lock
// right after the turn ended applies the queued switch first.
func TestSwitchQueuedAppliedBeforeSend(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acct", "a")
	f.hold(id, "h", "c1")
	f.send(id, "/approve x")
	req := f.waitFor(id, 0, isType(event.ApprovalRequested))
	f.switchTo(id, "b", "")
	release := make(chan struct{})
	f.h.afterTurnBegins = func() { <-release } // afterTurn waits: the send below comes first
	f.approveOpen(id, req)
	f.waitFor(id, 0, isType(event.TurnCompleted))
	tid, reply := f.turnDone(id, "/history next")
	close(release)
	sw := f.last(id, event.AccountSwitched)
	started := f.last(id, event.TurnStarted)
	if started.TurnID != tid || sw.Seq > started.Seq || !strings.HasSuffix(reply, "history=1") {
		t.Fatalf("switched at %d, the next turn started at %d: %q", sw.Seq, started.Seq, reply)
	}
}

// TestSwitchPortable: the leaving account holds no copy of the thread:
// a fresh thread on the new account, provider.thread_replaced
// {account_switch}, and the next turn carries the completed turns
// (failed ones left out); turn ids stay the journal's.
func TestSwitchPortable(t *testing.T) {
	for _, profile := range []string{"acct", "acctshared"} {
		t.Run(profile, func(t *testing.T) {
			f := newFixture(t)
			id := f.createOn(profile, "a")
			f.hold(id, "h", "c1")
			f.turnDone(id, "first words")
			f.turnDone(id, "/ratelimit refused words")
			old := f.info(id).ThreadID
			if err := os.Remove(filepath.Join(f.home(profile, "a"), old+".jsonl")); err != nil {
				t.Fatal(err)
			}
			f.switchTo(id, "b", "")
			if d := data(f.last(id, event.AccountSwitched)); d["continuity"] != "portable" {
				t.Fatalf("account.switched %v", d)
			}
			rep := data(f.last(id, event.ProviderThreadReplace))
			nu := f.info(id).ThreadID
			if rep["cause"] != "account_switch" || rep["oldThreadId"] != old || rep["newThreadId"] != nu || nu == old {
				t.Fatalf("thread_replaced %v (thread now %s)", rep, nu)
			}
			tid, reply := f.turnDone(id, "third /history")
			if !strings.Contains(reply, "User: first words\nAssistant: echo: first words\n") || strings.Contains(reply, "refused words") ||
				!strings.HasSuffix(reply, "third /history history=0") {
				t.Fatalf("reply %q", reply)
			}
			if d := data(f.last(id, event.TurnStarted)); d["text"] != "third /history" || d["turnId"] != tid {
				t.Fatalf("turn.started %v", d)
			}
			if _, reply := f.turnDone(id, "fourth"); reply != "echo: fourth" {
				t.Fatalf("the history went out twice: %q", reply)
			}
		})
	}
}

// TestSwitchFailedKeepsAccount: the new account's home is missing: the
// carry fails, account.switch_failed, the session keeps its account
// and stays live.
func TestSwitchFailedKeepsAccount(t *testing.T) {
	for _, tc := range []struct{ profile, to string }{
		{"acct", "gone"}, {"acctshared", "gone"}, {"acct", "file"}, {"acctshared", "file"}, {"acct", "loop"}, {"acctshared", "loop"},
	} {
		profile, to := tc.profile, tc.to
		t.Run(profile+"/"+to, func(t *testing.T) {
			f := newFixture(t)
			id := f.createOn(profile, "a")
			f.hold(id, "h", "c1")
			f.turnDone(id, "one")
			before := f.info(id)
			_, err := f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: to})
			if err == nil || !strings.Contains(err.Error(), "keeps its account") {
				t.Fatalf("err %v", err)
			}
			fd := data(f.last(id, event.AccountSwitchFailed))
			if n := strings.Count(err.Error(), fd["cause"].(string)); n != 1 {
				t.Fatalf("the answer names the cause %d times: %v", n, err) // the wire message is err.Error()
			}
			if fd["to"] != to || !strings.Contains(fd["cause"].(string), filepath.Join(profile, to)) {
				t.Fatalf("switch_failed %v", fd)
			}
			after := f.info(id)
			if after.Account != "a" || after.PID != before.PID || after.State != "live" {
				t.Fatalf("after %+v before %+v", after, before)
			}
			if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=1") {
				t.Fatalf("reply %q", reply)
			}
		})
	}
}

// TestSwitchStored: a stored session changes its pin (its thread carried
// now); its next hold runs on the new account.
func TestSwitchStored(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acct", "a")
	f.hold(id, "h", "c1")
	f.turnDone(id, "one")
	if _, err := f.h.Close(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if r := f.switchTo(id, "b", "now"); !r.Switched || r.Account != "b" {
		t.Fatalf("switch = %+v", r)
	}
	if f.h.lookup(id) != nil {
		t.Fatal("a stored session's switch left an entry")
	}
	if d := data(f.last(id, event.AccountSwitched)); d["continuity"] != "native" {
		t.Fatalf("account.switched %v", d)
	}
	f.hold(id, "h", "c1")
	if si := f.info(id); si.Account != "b" {
		t.Fatalf("account %q", si.Account)
	}
	if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=1") {
		t.Fatalf("reply %q", reply)
	}
	_, err := f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: "zzz"})
	wantKind(t, err, api.KindUnknownAccount)
}

// TestSwitchNotFoundAtResume: the carry said done but the joining account
// answers the typed not-found at resume: the session goes portable (the
// adapter's provider.thread_replaced), and its next turn carries the
// history. A profile without a mover is portable at once.
func TestSwitchNotFoundAtResume(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mover provider.Mover
	}{
		{"silent-mover", func(context.Context, provider.Move) error { return nil }},
		{"no-mover", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			p := f.h.o.Providers["acctshared"]
			p.Mover = tc.mover
			f.h.o.Providers["acctshared"] = p // before any session: nothing reads it yet
			id := f.createOn("acctshared", "a")
			f.hold(id, "h", "c1")
			f.turnDone(id, "earlier")
			old := f.info(id).ThreadID
			f.switchTo(id, "b", "")
			if d := data(f.last(id, event.AccountSwitched)); d["continuity"] != "portable" {
				t.Fatalf("account.switched %v", d)
			}
			if rep := data(f.last(id, event.ProviderThreadReplace)); rep["oldThreadId"] != old {
				t.Fatalf("thread_replaced %v", rep)
			}
			if _, reply := f.turnDone(id, "now"); !strings.Contains(reply, "User: earlier\nAssistant: echo: earlier\n") {
				t.Fatalf("reply %q", reply)
			}
		})
	}
}

// TestSwitchCopyTooLarge: the thread's copy in the leaving home is over
// the mover's bound: the switch fails naming the bound, nothing is
// written in the joining home, the session keeps its account.
func TestSwitchCopyTooLarge(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("acct", "a")
	f.hold(id, "h", "c1")
	f.turnDone(id, "one")
	th := f.info(id).ThreadID
	if err := os.Truncate(filepath.Join(f.home("acct", "a"), th+".jsonl"), provider.DefaultMoveMaxBytes+1); err != nil {
		t.Fatal(err) // sparse: nothing written
	}
	_, err := f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: "b"})
	if api.KindOf(err) != api.KindProviderFailed || !errors.Is(err, provider.ErrThreadCopyTooLarge) {
		t.Fatalf("err %v", err)
	}
	if fd := data(f.last(id, event.AccountSwitchFailed)); fd["to"] != "b" || !strings.Contains(fd["cause"].(string), "over the bound") {
		t.Fatalf("switch_failed %v", fd)
	}
	if left, _ := os.ReadDir(f.home("acct", "b")); len(left) != 0 {
		t.Fatalf("the joining home holds %v", left)
	}
	if si := f.info(id); si.Account != "a" || si.State != "live" {
		t.Fatalf("after %+v", si)
	}
}
