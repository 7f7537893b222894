package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
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

type panicSub struct{}

func (panicSub) ID() string { return "p" }
func (panicSub) Abandon()   {}
func (panicSub) Next(context.Context) (event.Event, error) {
	panic("host bug")
}

// TestPumpPanicClosesOnlyThatConnection: a panicking subscription closes
// its connection (ConnClosed runs) and the daemon goes on.
func TestPumpPanicClosesOnlyThatConnection(t *testing.T) {
	fake := newFake()
	fake.attachHook = func(string, api.AttachParams, bool) (api.AttachResult, api.Subscription, error) {
		return api.AttachResult{SubscriptionID: "p"}, panicSub{}, nil
	}
	ts := startServer(t, fake, nil)
	a := ts.client(t, FramingLines, nil, false)
	call(t, a, "agentSession.attach", api.AttachParams{SessionID: "s_aaaaaaaa"}, nil)
	wait(t, a.Done())
	if id := recv(t, fake.closedCh); id != a.Init.ConnectionID {
		t.Fatalf("ConnClosed(%s)", id)
	}
	b := ts.client(t, FramingHeader, nil, false)
	if err := call(t, b, "agentSession.list", nil, nil); err != nil {
		t.Fatal(err)
	}
}
