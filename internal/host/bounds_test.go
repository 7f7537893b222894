package host

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/proc"
)

// stuckStop makes the stop step hang until the returned release is called,
// then run the real ladder. It is installed under the session lock.
func stuckStop(f *fixture, id string) (release func()) {
	e := f.h.lookup(id)
	real := f.h.stopChild
	gate := make(chan struct{})
	e.mu.Lock()
	f.h.stopChild = func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict {
		<-gate
		return real(context.WithoutCancel(ctx), c, l)
	}
	e.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

// A step left running by a failed attempt never wedges the next one: the
// next close (a context without deadline) waits for it at most a step
// timeout, then fails naming the wait.
func TestEvictionDoesNotWaitForeverForAStuckStep(t *testing.T) {
	f := newFixture(t)
	f.h.o.StepTimeout = 200 * time.Millisecond
	ctx := context.Background()
	id := f.create("echo")
	f.hold(id, "h", "c1")
	release := stuckStop(f, id)
	defer release()

	_, err := f.h.Close(ctx, id)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Data["step"] != StepStopChild {
		t.Fatalf("first close: %v, want a timed-out %s", err, StepStopChild)
	}
	closed := make(chan error, 1)
	go func() { _, err := f.h.Close(ctx, id); closed <- err }()
	select {
	case err = <-closed:
	case <-time.After(stallGuard):
		release()
		<-closed
		t.Fatal("second close waited for the stuck step of the first")
	}
	if !errors.As(err, &ae) || ae.Data["step"] != "wait-previous-attempt" {
		t.Fatalf("second close: %v, want wait-previous-attempt", err)
	}
	release()
	f.clk.Advance(time.Minute) // the retry, once the stuck step returned
	for f.h.lookup(id) != nil {
		if _, err := f.h.Close(ctx, id); err != nil && !strings.Contains(err.Error(), "wait-previous-attempt") {
			t.Fatal(err)
		}
	}
}

// A hold waiting for a session lock held elsewhere gives up at its own
// deadline with its context's error.
func TestHoldHonoursItsDeadlineBehindSessionLock(t *testing.T) {
	f := newFixture(t)
	id := f.create("echo")
	f.hold(id, "h", "c1")
	e := f.h.lookup(id)
	e.mu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	held := make(chan error, 1)
	go func() {
		_, err := f.h.Hold(ctx, "c2", api.HoldParams{SessionID: id, HolderID: "h2"})
		held <- err
	}()
	var err error
	select {
	case err = <-held:
	case <-time.After(stallGuard):
		e.mu.Unlock()
		<-held
		t.Fatal("hold ignored its deadline behind the session lock")
	}
	e.mu.Unlock()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hold behind a held session lock: %v, want its deadline", err)
	}
}

// Shutdown is bounded even when a session's lock is never released: it
// gives up on that session, says which in the log, and returns.
func TestShutdownGivesUpOnAWedgedSession(t *testing.T) {
	f := newFixture(t)
	logs := &syncBuf{}
	f.h.log = slog.New(slog.NewTextHandler(logs, nil))
	f.h.o.StepTimeout = 100 * time.Millisecond
	id := f.create("echo")
	f.hold(id, "h", "c1")
	e := f.h.lookup(id)
	e.mu.Lock() // a step that never returns holds it
	done := make(chan error, 1)
	go func() { done <- f.h.Shutdown(context.Background()) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(stallGuard):
		e.mu.Unlock()
		<-done
		t.Fatal("shutdown waited for a session lock that is never released")
	}
	e.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("shutdown: %v, want it to name %s", err, id)
	}
	if l := logs.String(); !strings.Contains(l, "shutdown gave up on sessions") || !strings.Contains(l, id) {
		t.Fatalf("log does not name the session shutdown gave up on:\n%s", l)
	}
	// What an operator's retry would do. Steps keep the 100 ms timeout set
	// above, which a loaded machine can miss: a step that timed out is
	// retried, as an operator would, until stallGuard.
	for deadline := time.Now().Add(stallGuard); ; {
		_, err := f.h.Close(context.Background(), id)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "timed out") || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
