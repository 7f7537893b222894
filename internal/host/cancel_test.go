package host

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// cancel while the child is exiting after a crash answers {cancelled:false}
// or session_not_live, never provider_failed: the adapter sees the exit (a
// broken pipe, stdout's end) before the host's watcher does, and that
// window is where the cancels land.
func TestCancelDuringCrashExitIsNotAFailure(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create("echo")
	for round := range 30 {
		f.hold(id, "h", "c1")
		sr, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/crash"})
		if err != nil {
			t.Fatal(err)
		}
		// The crash follows the turn's first delta.
		delta := f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.MessageDelta && ev.TurnID == sr.TurnID })
		for {
			_, err := f.h.Cancel(ctx, id)
			if err == nil {
				continue // answered while the child still ran
			}
			if api.KindOf(err) != api.KindSessionNotLive {
				t.Fatalf("round %d: cancel during the crash exit: %v (kind %v), want session_not_live or {cancelled:false}",
					round, err, api.KindOf(err))
			}
			break
		}
		f.waitFor(id, delta.Seq, isType(event.LeaseReleased)) // torn down before the next round
	}
}

// TestCancelOfStoppedProviderIsBounded: a cancel against a provider that
// stopped answering (SIGSTOP) waits for it at most step_timeout and
// answers provider_failed naming that bound and the fix (close), not the
// adapter's 30 s request timeout. The turn stays open (the provider never said
// it ended) and a close then ends it.
func TestCancelOfStoppedProviderIsBounded(t *testing.T) {
	f := newFixture(t)
	f.h.o.RequestTimeout = 10 * time.Minute // only step_timeout may end the wait
	id := f.create("echo")
	hr := f.hold(id, "h", "c1")
	ctx := context.Background()
	sr, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: "/sleep 600000"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnStarted && ev.TurnID == sr.TurnID })
	if err := syscall.Kill(hr.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(hr.PID, syscall.SIGCONT) })
	done := make(chan error, 1)
	go func() { _, err := f.h.Cancel(ctx, id); done <- err }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute): // step_timeout is 5 s; the request timeout 10 min
		t.Fatal("cancel against a stopped provider still waiting: not bounded by step_timeout")
	}
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Kind != api.KindProviderFailed || !strings.Contains(ae.Msg, "step_timeout") ||
		!strings.Contains(ae.Msg, "close") {
		t.Fatalf("cancel against a stopped provider: %v, want provider_failed naming step_timeout and the fix", err)
	}
	if _, err := f.h.Close(ctx, id); err != nil {
		t.Fatalf("close after the unanswered cancel: %v", err)
	}
	f.waitFor(id, 0, func(ev event.Event) bool { return ev.Type == event.TurnCompleted && ev.TurnID == sr.TurnID })
}

// TestCancelBehindBlockedSendIsBounded: a cancel that waits behind a send
// blocked writing 900 KB to a provider that stopped reading gives up at
// step_timeout with provider_failed naming the bound and the fix; the
// close it names then stops the child and ends the send.
func TestCancelBehindBlockedSendIsBounded(t *testing.T) {
	f := newFixture(t)
	id := f.create("echo")
	hr := f.hold(id, "h", "c1")
	ctx := context.Background()
	if err := syscall.Kill(hr.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(hr.PID, syscall.SIGCONT) })
	sent := make(chan error, 1)
	go func() {
		_, err := f.h.Send(ctx, api.SendParams{SessionID: id, Text: strings.Repeat("x", 900<<10)})
		sent <- err
	}()
	f.waitFor(id, 0, isType(event.TurnStarted)) // the send holds the session lock from here until its write ends
	_, err := f.h.Cancel(ctx, id)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Kind != api.KindProviderFailed || !strings.Contains(ae.Msg, "step_timeout") ||
		!strings.Contains(ae.Msg, "close") {
		t.Fatalf("cancel behind a blocked send: %v, want provider_failed naming step_timeout and the fix", err)
	}
	if _, err := f.h.Close(ctx, id); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case <-sent:
	case <-time.After(60 * time.Second):
		t.Fatal("the blocked send did not end after the close")
	}
}
