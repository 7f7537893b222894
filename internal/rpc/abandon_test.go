package rpc

import (
	"errors"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestAttachAbandoned: an attach whose reply cannot be built after the
// backend subscribed (here the page's read-on for a connection without
// items.v1 fails) answers the error and abandons the subscription it was
// handed, through the subscription: nothing is pumped, rpc calls no
// other backend method to undo it.
func TestAttachAbandoned(t *testing.T) {
	fake := newFake()
	sub := &fakeSub{id: "sub-7", abandoned: make(chan struct{})}
	fake.attachHook = func(string, api.AttachParams, bool) (api.AttachResult, api.Subscription, error) {
		hidden := []event.Event{{SessionID: "s_aaaaaaaa", Seq: 1, Type: event.ItemStarted}}
		return api.AttachResult{SubscriptionID: sub.id, Events: hidden, LastSeq: 5, HasMore: true}, sub, nil
	}
	fake.readErr = api.ErrSessionNotFound
	ts := startServer(t, fake, nil)
	c, err := Dial(t.Context(), ts.path, ClientOptions{Capabilities: []string{api.CapAttach, api.CapStructuredHold}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = call(t, c, "agentSession.attach", api.AttachParams{SessionID: "s_aaaaaaaa"}, nil)
	if !errors.Is(err, &Error{Reason: "session_not_found"}) {
		t.Fatalf("attach = %v, want session_not_found", err)
	}
	recv(t, sub.abandoned)
	select {
	case id := <-fake.detached:
		t.Fatalf("rpc detached %s through the backend", id)
	default:
	}
}
