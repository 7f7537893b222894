package host

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestSwitchStorm: two sessions of a shared profile, each switched back
// and forth between a and b by several callers at once (the stale
// runtimes recycled under the others, switches queued behind them): no
// call fails but thread_busy for "now", each session ends live on one
// account with no switch left queued, its thread whole, and its journal
// has every turn.started closed by exactly one turn.completed.
func TestSwitchStorm(t *testing.T) {
	f := newFixture(t)
	ids := []string{f.createOn("acctshared", "a"), f.createOn("acctshared", "a")}
	for _, id := range ids {
		f.hold(id, "h", "c1")
		f.turnDone(id, "first")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				id, to, when := ids[(c+i)%2], []string{"a", "b"}[(c+i/2)%2], []string{"", "now"}[i%3/2]
				_, err := f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: to, When: when})
				if err != nil && !(when == "now" && api.KindOf(err) == api.KindThreadBusy) {
					errs <- fmt.Errorf("switch %s to %s (%q): %w", id, to, when, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, id := range ids {
		for {
			seq := f.info(id).LastSeq // before the record: a switch applied in between is after seq
			rec, err := f.h.record(id)
			if err != nil {
				t.Fatal(err)
			}
			if rec.PendingSwitch == nil {
				break
			}
			f.waitFor(id, seq, func(ev event.Event) bool {
				return ev.Type == event.AccountSwitched || ev.Type == event.AccountSwitchFailed || ev.Type == event.AccountSwitchQueued
			})
		}
		si := f.info(id)
		if si.State != "live" || (si.Account != "a" && si.Account != "b") {
			t.Fatalf("after the storm: %+v", si)
		}
		if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, "history=1") {
			t.Fatalf("%s replied %q", id, reply)
		}
		evs, _, _, err := f.j.Read(id, 0, 4096)
		if err != nil {
			t.Fatal(err)
		}
		done := map[string]int{}
		var started []string
		for _, ev := range evs {
			switch ev.Type {
			case event.TurnStarted:
				started = append(started, ev.TurnID)
			case event.TurnCompleted:
				done[ev.TurnID]++
			}
		}
		for _, tid := range started {
			if done[tid] != 1 {
				t.Fatalf("%s: turn %s has %d turn.completed", id, tid, done[tid])
			}
		}
	}
}

// TestSwitchRacesSend: switches (idle) and sends on one session at once:
// every call succeeds (a switch meeting a turn is queued, a send meeting
// a queued switch applies it first), and the thread keeps every turn.
func TestSwitchRacesSend(t *testing.T) {
	for _, profile := range []string{"acct", "acctshared"} {
		t.Run(profile, func(t *testing.T) {
			f := newFixture(t)
			id := f.createOn(profile, "a")
			f.hold(id, "h", "c1")
			const n = 6
			var wg sync.WaitGroup
			errs := make(chan error, 2*n)
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := range n {
					if _, err := f.h.SwitchAccount(context.Background(), api.SwitchAccountParams{SessionID: id, Account: []string{"b", "a"}[i%2]}); err != nil {
						errs <- err
					}
				}
			}()
			go func() {
				defer wg.Done()
				for i := range n {
					r, err := f.h.Send(context.Background(), api.SendParams{SessionID: id, Text: fmt.Sprint("turn ", i)})
					if err != nil {
						errs <- err
						continue
					}
					f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnCompleted && ev.TurnID == r.TurnID })
				}
			}()
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for {
				seq := f.info(id).LastSeq // before the record: a switch applied in between is after seq
				rec, err := f.h.record(id)
				if err != nil {
					t.Fatal(err)
				}
				if rec.PendingSwitch == nil {
					break
				}
				f.waitFor(id, seq, isType(event.AccountSwitched))
			}
			if _, reply := f.turnDone(id, "/history"); !strings.HasSuffix(reply, fmt.Sprint("history=", n)) {
				t.Fatalf("reply %q", reply)
			}
		})
	}
}
