package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// TestConnClosedAfterHandlers: a hold still running when its connection
// goes (a slow spawn that ignores ctx) finishes before ConnClosed runs, so
// ConnClosed can drop what it took.
func TestConnClosedAfterHandlers(t *testing.T) {
	fake := newFake()
	entered := make(chan struct{})
	violated := make(chan bool, 1)
	closedSig := make(chan struct{})
	fake.onConnClosed = func() { close(closedSig) }
	fake.holdHook = func(ctx context.Context) error {
		close(entered)
		<-ctx.Done()
		select {
		case <-closedSig:
			violated <- true
		case <-time.After(300 * time.Millisecond): // the spawn finishing late
			violated <- false
		}
		return nil
	}
	ts := startServer(t, fake, nil)
	a := ts.client(t, FramingLines, nil, false)
	go call(t, a, "agentSession.hold", api.HoldParams{SessionID: "s_aaaaaaaa", HolderID: "h"}, nil)
	wait(t, entered)
	a.Close()
	if recv(t, violated) {
		t.Fatal("ConnClosed ran while a hold of that connection was still in flight")
	}
	recv(t, fake.closedCh)
}

func wait[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a signal")
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a value")
	}
	panic("unreachable")
}
