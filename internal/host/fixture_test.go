package host

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider/codex"
	"github.com/sessiond/sessiond/internal/provider/echo"
	"github.com/sessiond/sessiond/internal/store"
)

func TestMain(m *testing.M) {
	if os.Getenv("HOST_TEST_ECHO") == "1" {
		os.Exit(echo.Main(os.Args[1:], os.Stdin, os.Stdout))
	}
	goleak.VerifyTestMain(m)
}

// fakeClock fires timers only when the test advances it; callbacks run in
// the advancing goroutine, so the test sees their effect on return.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves time by d and runs every timer now due, in time order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.Slice(due, func(i, k int) bool { return due[i].at.Before(due[k].at) })
	for _, t := range due {
		t.f()
	}
}

type fixture struct {
	t   *testing.T
	h   *Host
	st  *store.Store
	j   *journal.Journal
	clk *fakeClock
	dir string
}

const idle = time.Minute

func newFixture(t *testing.T, jopts ...journal.Options) *fixture {
	t.Helper()
	jo := journal.Options{}
	if len(jopts) > 0 {
		jo = jopts[0]
	}
	dir := t.TempDir()
	st, err := store.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(st.DB, jo)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	// GORACE: a race-enabled binary otherwise sleeps 1 s at exit.
	env := map[string]string{"HOST_TEST_ECHO": "1", "GORACE": "atexit_sleep_ms=0", "SESSIOND_ECHO_HOME": filepath.Join(dir, "echo")}
	self, _ := os.Executable()
	prov := func(name string, flags ...string) Provider {
		return Provider{Name: name, Command: append([]string{self}, flags...), Env: env, New: codex.New, Adopt: codex.Adopt}
	}
	h, err := New(Options{
		Store: st, Journal: j, Clock: clk, IdleTimeout: idle,
		StartTimeout: 10 * time.Second, StepTimeout: 5 * time.Second,
		Ladder: proc.Ladder{Grace: 200 * time.Millisecond, TermTimeout: 300 * time.Millisecond, KillTimeout: time.Second},
		Providers: map[string]Provider{
			"echo":      prov("echo"),
			"stubborn":  prov("stubborn", "--ignore-sigterm", "--ignore-eof"),
			"failstart": prov("failstart", "--exit-at-start"),
			"slowstart": prov("slowstart", "--slow-start", "300"),
			"shared":    sharedProv(prov("shared")),
			// sharedstubborn's process outlives its stdin and SIGTERM: its
			// ladder runs to SIGKILL.
			"sharedstubborn": sharedProv(prov("sharedstubborn", "--ignore-sigterm", "--ignore-eof")),
			// Profiles with accounts (accounts_test.go).
			"acct":           acctProv(prov("acct"), dir, nil),
			"acctshared":     acctProv(sharedProv(prov("acctshared")), dir, nil),
			"failover":       acctProv(prov("failover"), dir, []string{"limited", "b", "itemlimited"}),
			"sharedfailover": acctProv(sharedProv(prov("sharedfailover")), dir, []string{"limited", "b"}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, h: h, st: st, j: j, clk: clk, dir: dir}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		j.Close()
		st.Close()
		if left, err := proc.ScanTagged(st.StateID); err != nil || len(left) > 0 {
			t.Errorf("tagged processes left behind: %v (scan err %v)", left, err)
		}
	})
	return f
}

// sharedProv is p with processes = "account": one runtime per account.
func sharedProv(p Provider) Provider {
	p.Shared, p.NewRuntime, p.AdoptRuntime = true, codex.NewRuntime, codex.AdoptRuntime
	return p
}

func (f *fixture) create(provider string) string {
	f.t.Helper()
	si, err := f.h.Create(context.Background(), api.CreateParams{Provider: provider, Cwd: f.dir})
	if err != nil {
		f.t.Fatal(err)
	}
	return si.SessionID
}

func (f *fixture) hold(id, holder, conn string) api.HoldResult {
	f.t.Helper()
	r, err := f.h.Hold(context.Background(), conn, api.HoldParams{SessionID: id, HolderID: holder})
	if err != nil {
		f.t.Fatalf("hold %s: %v", id, err)
	}
	return r
}

// waitFor reads the session's events after afterSeq until one satisfies ok,
// re-subscribing from the last seen seq if its queue overflows.
func (f *fixture) waitFor(id string, afterSeq uint64, ok func(event.Event) bool) event.Event {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		snap, _, _, sub, err := f.j.Subscribe(id, afterSeq, 4096)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, ev := range snap {
			afterSeq = ev.Seq
			if ok(ev) {
				sub.Close()
				return ev
			}
		}
		for {
			ev, err := sub.Next(ctx)
			if errors.Is(err, journal.ErrLagged) {
				break
			}
			if err != nil {
				sub.Close()
				f.t.Fatalf("waiting for an event of session %s: %v", id, err)
			}
			afterSeq = ev.Seq
			if ok(ev) {
				sub.Close()
				return ev
			}
		}
		sub.Close()
	}
}

func isType(typ string) func(event.Event) bool {
	return func(ev event.Event) bool { return ev.Type == typ }
}

// types returns the journal's event types in seq order.
func (f *fixture) types(id string) []string {
	f.t.Helper()
	evs, _, _, err := f.j.Read(id, 0, 4096)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// tail asserts the journal ends with want.
func (f *fixture) tail(id string, want ...string) {
	f.t.Helper()
	got := f.types(id)
	if len(got) < len(want) || !slices.Equal(got[len(got)-len(want):], want) {
		f.t.Fatalf("journal of %s ends %v, want ... %v", id, got, want)
	}
}

func data(ev event.Event) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(ev.Data, &m)
	return m
}

func wantKind(t *testing.T, err error, k api.Kind) {
	t.Helper()
	if api.KindOf(err) != k {
		t.Fatalf("err %v (kind %v), want kind %v", err, api.KindOf(err), k)
	}
}
