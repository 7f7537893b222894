package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

func (f *fixture) createOn(provider, account string) string {
	f.t.Helper()
	si, err := f.h.Create(context.Background(), api.CreateParams{Provider: provider, Cwd: f.dir, Account: account})
	if err != nil {
		f.t.Fatal(err)
	}
	return si.SessionID
}

func (f *fixture) switchTo(id, account, when string) api.SwitchAccountResult {
	f.t.Helper()
	r, err := f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: account, When: when})
	if err != nil {
		f.t.Fatalf("switch %s to %s: %v", id, account, err)
	}
	return r
}

// turnDone sends text and waits for its turn.completed; it returns the
// turn id and the reply.
func (f *fixture) turnDone(id, text string) (string, string) {
	f.t.Helper()
	tid := f.send(id, text)
	f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnCompleted && ev.TurnID == tid })
	return tid, f.replyOf(id, tid)
}

func (f *fixture) home(profile, account string) string {
	return filepath.Join(f.dir, "homes", profile, account)
}

func TestCreateAccount(t *testing.T) {
	f := newFixture(t)
	_, err := f.h.Create(context.Background(), api.CreateParams{Provider: "acct", Cwd: f.dir, Account: "nope"})
	wantKind(t, err, api.KindUnknownAccount)
	var ae *api.Error
	if !errorsAs(err, &ae) || !slices.Equal(ae.Data["known"].([]string), []string{"default", "a", "b", "file", "gone", "itemlimited", "limited", "loop"}) {
		t.Fatalf("data %v", ae.Data)
	}
	id := f.createOn("acct", "b")
	if si := f.info(id); si.Account != "b" {
		t.Fatalf("account %q", si.Account)
	}
	f.hold(id, "h", "c1")
	_, reply := f.turnDone(id, "hi")
	if reply != "echo: hi" {
		t.Fatalf("reply %q", reply)
	}
	th := f.info(id).ThreadID
	if _, err := os.Stat(filepath.Join(f.home("acct", "b"), th+".jsonl")); err != nil {
		t.Fatalf("the thread is not in account b's home: %v", err)
	}
	if d := f.info(f.create("acct")).Account; d != "default" {
		t.Fatalf("default account %q", d)
	}
}

// TestSwitchIdleNative: an idle live session moves to another account:
// its thread's file is carried and resumed there by id (the provider on
// b sees the earlier turn), its holds stay, the journal says native.
func TestSwitchIdleNative(t *testing.T) {
	for _, profile := range []string{"acct", "acctshared"} {
		t.Run(profile, func(t *testing.T) {
			f := newFixture(t)
			id := f.createOn(profile, "a")
			f.hold(id, "h", "c1")
			t1, _ := f.turnDone(id, "one")
			before := f.info(id)
			r := f.switchTo(id, "b", "")
			if !r.Switched || r.Queued || r.Account != "b" {
				t.Fatalf("switch = %+v", r)
			}
			sw := f.last(id, event.AccountSwitched)
			if d := data(sw); d["from"] != "a" || d["to"] != "b" || d["cause"] != "user" || d["continuity"] != "native" {
				t.Fatalf("account.switched %v", d)
			}
			after := f.info(id)
			if after.Account != "b" || after.ThreadID != before.ThreadID || !slices.Equal(after.Holders, []string{"h"}) || after.State != "live" {
				t.Fatalf("after the switch %+v (before %+v)", after, before)
			}
			if profile == "acctshared" && after.RuntimeID == before.RuntimeID {
				t.Fatalf("still on runtime %s", after.RuntimeID)
			}
			t2, reply := f.turnDone(id, "two /history")
			if !strings.HasSuffix(reply, "history=1") {
				t.Fatalf("the thread on b does not have the turn of a: %q", reply)
			}
			if t1 == t2 {
				t.Fatal("turn ids")
			}
		})
	}
}

func errorsAs(err error, target **api.Error) bool {
	e, ok := err.(*api.Error)
	if ok {
		*target = e
	}
	return ok
}
