package proc

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock fires timers only when advanced, on the advancing goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at   time.Time
	f    func()
	done bool // fired or stopped
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return &fakeStopper{c, t}
}

type fakeStopper struct {
	c *fakeClock
	t *fakeTimer
}

func (s *fakeStopper) Stop() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	was := !s.t.done
	s.t.done = true
	return was
}

// advanceTo moves the clock to start+d, firing due timers in order.
func (c *fakeClock) advanceTo(start time.Time, d time.Duration) {
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.done && !t.at.After(start.Add(d)) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			c.now = start.Add(d)
			c.mu.Unlock()
			return
		}
		next.done = true
		c.now = next.at
		c.mu.Unlock()
		next.f()
	}
}

func (c *fakeClock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// scriptedReap answers verdicts from a script and records when it ran.
type scriptedReap struct {
	clock  *fakeClock
	start  time.Time
	script []Outcome
	calls  []time.Duration
}

func (s *scriptedReap) reap(_ context.Context, _ *slog.Logger, surv []Identity, _ Tags, _ Ladder) Verdict {
	s.calls = append(s.calls, s.clock.Now().Sub(s.start))
	o := s.script[min(len(s.calls)-1, len(s.script)-1)]
	if o == Exited {
		return Verdict{Root: Exited, Tree: Exited}
	}
	return Verdict{Root: Exited, Tree: o, Survivors: surv}
}

func TestCleanupSchedule(t *testing.T) {
	sec := time.Second
	tests := []struct {
		name      string
		script    []Outcome
		wantCalls []time.Duration
		giveUp    bool
	}{
		{"gone at first retry", []Outcome{Exited}, []time.Duration{5 * sec}, false},
		{"gone at second retry", []Outcome{Live, Exited}, []time.Duration{5 * sec, 30 * sec}, false},
		{"never gone: dropped after 120s", []Outcome{Live}, []time.Duration{5 * sec, 30 * sec, 120 * sec}, true},
		{"unverifiable: dropped after 120s", []Outcome{Unverifiable}, []time.Duration{5 * sec, 30 * sec, 120 * sec}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := &fakeClock{now: start}
			var logs bytes.Buffer
			c := NewCleanup(testLadder, clk, slog.New(slog.NewTextHandler(&logs, nil)))
			s := &scriptedReap{clock: clk, start: start, script: tt.script}
			c.reap = s.reap
			c.Add(Tags{SessionID: "s-1", Fence: 2, StateID: "x"}, []Identity{{PID: 1 << 30}})
			if c.Pending() != 1 || clk.armed() != 1 {
				t.Fatalf("after Add: pending %d, timers %d", c.Pending(), clk.armed())
			}
			clk.advanceTo(start, 5*sec-time.Millisecond)
			if len(s.calls) != 0 {
				t.Fatalf("re-laddered before 5s: %v", s.calls)
			}
			clk.advanceTo(start, 10*time.Minute)
			if !equalDurations(s.calls, tt.wantCalls) {
				t.Errorf("attempts at %v, want %v", s.calls, tt.wantCalls)
			}
			if c.Pending() != 0 || clk.armed() != 0 {
				t.Errorf("after the schedule: pending %d, timers %d", c.Pending(), clk.armed())
			}
			if got := strings.Contains(logs.String(), "giving up"); got != tt.giveUp {
				t.Errorf("gave up logged = %v, want %v:\n%s", got, tt.giveUp, logs.String())
			}
			if tt.giveUp && !strings.Contains(logs.String(), "session_id=s-1") {
				t.Errorf("last verdict not logged with session_id:\n%s", logs.String())
			}
		})
	}
}

func TestCleanupCloseAll(t *testing.T) {
	start := time.Now()
	clk := &fakeClock{now: start}
	c := NewCleanup(testLadder, clk, nil)
	s := &scriptedReap{clock: clk, start: start, script: []Outcome{Live}}
	c.reap = s.reap
	c.Add(Tags{SessionID: "a", StateID: "x"}, nil)
	c.Add(Tags{SessionID: "b", StateID: "x"}, nil)
	clk.advanceTo(start, 5*time.Second) // both retried once, re-armed
	c.CloseAll(context.Background())
	if len(s.calls) != 4 {
		t.Errorf("attempts = %d, want 2 scheduled + 2 last", len(s.calls))
	}
	if c.Pending() != 0 || clk.armed() != 0 {
		t.Errorf("after CloseAll: pending %d, timers %d", c.Pending(), clk.armed())
	}
	c.Add(Tags{SessionID: "c", StateID: "x"}, nil)
	clk.advanceTo(start, time.Hour)
	if c.Pending() != 0 || len(s.calls) != 4 {
		t.Errorf("Add after CloseAll scheduled work: pending %d, calls %d", c.Pending(), len(s.calls))
	}
}

// A real survivor (a tagged, detached descendant ignoring SIGTERM whose
// root already exited) is killed by the first scheduled re-ladder.
func TestCleanupKillsRealSurvivor(t *testing.T) {
	h := spawnHelper(t, "orphan")
	h.Stdin().Close()
	<-h.Exited()
	if Probe(h.grand) != Alive {
		t.Fatal("descendant died with its root")
	}
	start := time.Now()
	clk := &fakeClock{now: start}
	c := NewCleanup(testLadder, clk, nil)
	c.Add(h.tags, []Identity{h.grand})
	clk.advanceTo(start, 5*time.Second)
	if c.Pending() != 0 {
		t.Errorf("pending = %d after the survivor was killed", c.Pending())
	}
	if st := Probe(h.grand); st == Alive {
		t.Errorf("survivor still alive")
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
