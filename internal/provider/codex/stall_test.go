package codex

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// A provider that stops reading its stdin cannot block a write forever:
// the write gives up after the request timeout with ErrTimeout.
func TestWriteToStalledProviderIsBounded(t *testing.T) {
	inR, inW, err := os.Pipe() // a real pipe: the daemon's children get one
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	outR, outW := io.Pipe()
	a := NewAdapter(Options{In: inW, Out: outR, RequestTimeout: 100 * time.Millisecond, Emit: func(event.Draft) {}})
	defer func() { outW.Close(); <-a.Done(); inW.Close() }()
	big := strings.Repeat("x", 1<<20) // far beyond the pipe's buffer; nobody reads
	done := make(chan error, 1)
	go func() { done <- a.write(outNotification{Method: "turn/start", Params: big}) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("write to a stalled provider: %v, want ErrTimeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("write to a stalled provider blocked")
	}
}

// BeginStop ends a write blocked on a provider that stopped reading, and
// refuses every later one, with ErrStopping; the request timeout is far off.
func TestBeginStopCancelsBlockedWrite(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	outR, outW := io.Pipe()
	a := NewAdapter(Options{In: inW, Out: outR, RequestTimeout: time.Hour, Emit: func(event.Draft) {}})
	defer func() { outW.Close(); <-a.Done(); inW.Close() }()
	big := strings.Repeat("x", 1<<20)
	done := make(chan error, 1)
	go func() { done <- a.write(outNotification{Method: "turn/start", Params: big}) }()
	// One byte arrived: the write is under way, and a megabyte cannot fit
	// the pipe, so it blocks (or is about to).
	buf := make([]byte, 1)
	if _, err := io.ReadFull(inR, buf); err != nil {
		t.Fatal(err)
	}
	a.BeginStop()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStopping) {
			t.Fatalf("blocked write after BeginStop: %v, want ErrStopping", err)
		}
	case <-time.After(waitLong):
		t.Fatal("write stayed blocked after BeginStop")
	}
	if err := a.notify("initialized", nil); !errors.Is(err, ErrStopping) {
		t.Fatalf("write after BeginStop: %v, want ErrStopping", err)
	}
}

// BeginStop ends a request waiting for its answer with ErrStopping.
func TestBeginStopEndsWaitingRequest(t *testing.T) {
	f := newFake(t, func(o *Options) { o.RequestTimeout = time.Hour })
	done := make(chan error, 1)
	go func() { _, err := f.a.Start(context.Background()); done <- err }()
	f.expect(t, "initialize") // sent; never answered
	f.a.BeginStop()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStopping) {
			t.Fatalf("request after BeginStop: %v, want ErrStopping", err)
		}
	case <-time.After(waitLong):
		t.Fatal("request still waiting after BeginStop")
	}
}

// A turn/start abandoned by BeginStop keeps its turn open: what the
// provider wrote for it is still emitted while it drains.
func TestTurnAbandonedByBeginStopStaysOpen(t *testing.T) {
	f := newFake(t, func(o *Options) { o.RequestTimeout = time.Hour })
	f.handshake(t)
	errc := make(chan error, 1)
	go func() { errc <- f.a.StartTurn(context.Background(), "t_1", "hi") }()
	f.expect(t, "turn/start") // never answered
	f.a.BeginStop()
	if err := <-errc; !errors.Is(err, ErrStopping) {
		t.Fatalf("StartTurn after BeginStop: %v, want ErrStopping", err)
	}
	f.send(t, map[string]any{"method": "item/agentMessage/delta", "params": map[string]any{"turnId": "pt", "delta": "late"}})
	f.rec.waitFor(t, event.MessageDelta, "t_1")
}

// CancelWrites leaves a request already written waiting for its answer (an
// exited child's answer may still be in the pipe).
func TestCancelWritesKeepsWaitingRequest(t *testing.T) {
	f := newFake(t, func(o *Options) { o.RequestTimeout = time.Hour })
	done := make(chan error, 1)
	go func() { _, err := f.a.Start(context.Background()); done <- err }()
	m := f.expect(t, "initialize")
	f.a.CancelWrites()
	f.reply(t, m, map[string]any{"userAgent": "fake"})
	// The answer arrived; the next write (initialized) is refused.
	if err := <-done; !errors.Is(err, ErrStopping) || !strings.Contains(err.Error(), "initialized") {
		t.Fatalf("Start after CancelWrites: %v, want initialized refused with ErrStopping", err)
	}
}
