package host

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestFailoverRetries: a rate-limited turn that produced no item marks
// its account limited, the session switches to the next unlimited
// account of the failover list and the same prompt goes once more as a
// new turn carrying retryOf, which completes there.
func TestFailoverRetries(t *testing.T) {
	for _, profile := range []string{"failover", "sharedfailover"} {
		t.Run(profile, func(t *testing.T) {
			f := newFixture(t)
			id := f.createOn(profile, "limited")
			f.hold(id, "h", "c1")
			failed := f.send(id, "please")
			retry := f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnStarted && data(ev)["retryOf"] == failed })
			f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnCompleted && ev.TurnID == retry.TurnID })
			fd := data(f.eventOf(id, event.TurnCompleted))
			if fd["status"] != "failed" || fd["reason"] != "rate_limited" || fd["resetsAt"] == nil {
				t.Fatalf("the failed turn %v", fd)
			}
			sw := data(f.last(id, event.AccountSwitched))
			if sw["from"] != "limited" || sw["to"] != "b" || sw["cause"] != "rate_limited" || sw["turnId"] != failed || sw["retried"] != true {
				t.Fatalf("account.switched %v", sw)
			}
			if reply := f.replyOf(id, retry.TurnID); reply != "echo: please" || data(retry)["text"] != "please" {
				t.Fatalf("retry %v replied %q", data(retry), reply)
			}
			n := 0
			for _, typ := range f.types(id) {
				if typ == event.TurnStarted {
					n++
				}
			}
			if n != 2 {
				t.Fatalf("%d turns started, want the failed one and its retry: %v", n, f.types(id))
			}
			la, err := f.h.ListAccounts(context.Background(), api.ListAccountsParams{Provider: profile})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range la.Accounts {
				switch a.Name {
				case "limited":
					if a.LimitedUntil == nil || *a.LimitedUntil != fd["resetsAt"] {
						t.Fatalf("limited: %+v (resetsAt %v)", a, fd["resetsAt"])
					}
				case "b":
					if a.LimitedUntil != nil || a.Sessions != 1 {
						t.Fatalf("b: %+v", a)
					}
				}
			}
		})
	}
}

// TestFailoverNoRetryAfterItem: a rate-limited turn that already ran a
// command switches but is not sent again (an effect must never run
// twice); account.switched says why.
func TestFailoverNoRetryAfterItem(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("failover", "itemlimited")
	f.hold(id, "h", "c1")
	failed := f.send(id, "do it")
	sw := f.waitFor(id, 0, isType(event.AccountSwitched))
	d := data(sw)
	if d["to"] != "limited" && d["to"] != "b" {
		t.Fatalf("account.switched %v", d)
	}
	if d["retried"] == true || !strings.Contains(d["noRetry"].(string), "items") || d["turnId"] != failed {
		t.Fatalf("account.switched %v", d)
	}
	f.send(id, "sync") // takes the session lock after the failover's goroutine let it go
	n := 0
	evs, _, _, _ := f.j.Read(id, 0, 4096)
	for _, ev := range evs {
		if ev.Type == event.TurnStarted && data(ev)["text"] == "do it" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("a turn that ran a command was sent %d times: %v", n, f.types(id))
	}
}

// TestFailoverExhausted: every account of the failover list limited:
// the turn stays failed and account.exhausted is journaled.
func TestFailoverExhausted(t *testing.T) {
	f := newFixture(t)
	f.h.mu.Lock()
	f.h.limited[runtimeKey{profile: "failover", account: "b"}] = f.clk.Now().Add(defaultLimit)
	f.h.limited[runtimeKey{profile: "failover", account: "itemlimited"}] = f.clk.Now().Add(2 * defaultLimit)
	f.h.mu.Unlock()
	id := f.createOn("failover", "limited")
	f.hold(id, "h", "c1")
	f.send(id, "x")
	ex := data(f.waitFor(id, 0, isType(event.AccountExhausted)))
	if ex["until"] != f.clk.Now().Add(defaultLimit).UTC().Format("2006-01-02T15:04:05Z07:00") {
		t.Fatalf("exhausted %v", ex)
	}
	if si := f.info(id); si.Account != "limited" {
		t.Fatalf("account %q", si.Account)
	}
}

// TestFailoverLimitKeptWhenSendComesFirst: a send takes the session lock
// after a rate-limited turn ended but before its failover ran: the
// account is still marked limited, and the failover switch is queued
// behind the new turn (applied at its turn.completed, the failed
// prompt not sent again: a newer one was).
func TestFailoverLimitKeptWhenSendComesFirst(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("failover", "b")
	f.hold(id, "h", "c1")
	release := make(chan struct{})
	var once sync.Once
	f.h.afterTurnBegins = func() { once.Do(func() { <-release }) } // the first afterTurn waits: the send below comes first
	failed := f.send(id, "/ratelimit x")
	f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnCompleted && ev.TurnID == failed })
	f.send(id, "/approve y")
	req := f.waitFor(id, 0, isType(event.ApprovalRequested))
	close(release)
	q := data(f.waitFor(id, 0, isType(event.AccountSwitchQueued)))
	if q["from"] != "b" || q["to"] != "itemlimited" || q["cause"] != "rate_limited" {
		t.Fatalf("account.switch_queued %v", q)
	}
	la, err := f.h.ListAccounts(context.Background(), api.ListAccountsParams{Provider: "failover"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range la.Accounts {
		if a.Name == "b" && a.LimitedUntil == nil {
			t.Fatalf("b is not marked limited: %+v", a)
		}
	}
	f.approveOpen(id, req)
	sw := data(f.waitFor(id, 0, isType(event.AccountSwitched)))
	if sw["to"] != "itemlimited" || sw["cause"] != "rate_limited" {
		t.Fatalf("account.switched %v", sw)
	}
	evs, _, _, err := f.j.Read(id, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == event.TurnStarted && data(ev)["retryOf"] != nil {
			t.Fatalf("the failed prompt was sent again: %v", data(ev))
		}
	}
}

// TestFailoverLoopNoStorm: every account of the list ends up limited
// (b by the directive, itemlimited after an item, limited by its env):
// the prompt is sent again once only (a retry is never retried), each
// account is tried once, and the next turn's failure is
// account.exhausted once, the session staying where it is.
func TestFailoverLoopNoStorm(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("failover", "b")
	f.hold(id, "h", "c1")
	failed := f.send(id, "/ratelimit x")
	sw := f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.AccountSwitched && data(ev)["to"] == "limited" })
	if d := data(sw); d["retried"] == true || d["noRetry"] == nil {
		t.Fatalf("the retry's failover %v", d)
	}
	last := f.send(id, "y")
	f.waitFor(id, 0, func(ev event.Event) bool {
		return ev.Type == event.AccountExhausted && data(ev)["turnId"] == last
	})
	evs, _, _, err := f.j.Read(id, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	var started, retries, switched, exhausted int
	for _, ev := range evs {
		switch ev.Type {
		case event.TurnStarted:
			started++
			if r := data(ev)["retryOf"]; r != nil {
				retries++
				if r != failed {
					t.Fatalf("retryOf %v", r)
				}
			}
		case event.AccountSwitched:
			switched++
		case event.AccountExhausted:
			exhausted++
		}
	}
	if started != 3 || retries != 1 || switched != 2 || exhausted != 1 {
		t.Fatalf("%d turns, %d retries, %d switches, %d exhausted: %v", started, retries, switched, exhausted, f.types(id))
	}
	if si := f.info(id); si.Account != "limited" || si.State != "live" {
		t.Fatalf("after %+v", si)
	}
}

// TestFailoverBehindRecycle: the failover's next account runs a runtime
// that keeps a stale copy of the thread and serves another session: the
// failover is queued {thread_busy}, that runtime recycled, and the
// failed prompt still sent once more there (retryOf), once.
func TestFailoverBehindRecycle(t *testing.T) {
	f := newFixture(t)
	id := f.createOn("sharedfailover", "b")
	other := f.createOn("sharedfailover", "b")
	f.hold(id, "h", "c1")
	f.hold(other, "h", "c1")
	f.turnDone(id, "on b")
	f.switchTo(id, "limited", "")
	failed := f.send(id, "please")
	if d := data(f.waitFor(id, 0, isType(event.AccountSwitchQueued))); d["to"] != "b" || d["reason"] != "thread_busy" || d["cause"] != "rate_limited" {
		t.Fatalf("switch_queued %v", d)
	}
	retry := f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnStarted && data(ev)["retryOf"] == failed })
	f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnCompleted && ev.TurnID == retry.TurnID })
	if reply := f.replyOf(id, retry.TurnID); reply != "echo: please" {
		t.Fatalf("retry replied %q", reply)
	}
	if sw := data(f.last(id, event.AccountSwitched)); sw["to"] != "b" || sw["retried"] != true || sw["turnId"] != failed {
		t.Fatalf("account.switched %v", sw)
	}
	if si := f.info(other); si.State != "live" {
		t.Fatalf("the other session %+v", si)
	}
}
