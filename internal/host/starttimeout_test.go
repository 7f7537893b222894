package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
)

// TestStartTimeoutAboveRequestTimeout: the handshake's requests wait
// until the start's deadline (start_timeout), not the per-request
// timeout: a provider slower to answer initialize than the request
// timeout starts. (Before: "initialize after 30s: provider request timed
// out" for start_timeout = "2m" and a 35 s start.)
func TestStartTimeoutAboveRequestTimeout(t *testing.T) {
	f := newFixture(t)
	f.h.o.RequestTimeout = 20 * time.Millisecond // the slowstart provider reads stdin after 300 ms
	id := f.create("slowstart")
	if r := f.hold(id, "w1", "c1"); r.PID == 0 {
		t.Fatalf("hold %+v", r)
	}
}

// TestShutdownCancelsStart: a shutdown cancels a provider start in
// progress: the hold fails at once naming the shutdown, and the child is
// torn down (the fixture's cleanup finds no tagged process). (Before: the
// shutdown waited out the whole handshake, start_timeout at most.)
func TestShutdownCancelsStart(t *testing.T) {
	f := newFixture(t)
	f.h.o.StartTimeout = time.Hour
	p := f.h.o.Providers["slowstart"]
	p.Command = append(p.Command[:len(p.Command)-1:len(p.Command)-1], "60000") // --slow-start 60 s
	f.h.o.Providers["slowstart"] = p
	id := f.create("slowstart")
	held := make(chan error, 1)
	go func() {
		_, err := f.h.Hold(context.Background(), "c1", api.HoldParams{SessionID: id, HolderID: "w1"})
		held <- err
	}()
	for { // the child is spawned and its handshake waits
		e := f.h.lookup(id)
		f.h.mu.Lock()
		spawned := e != nil && e.pid != 0
		f.h.mu.Unlock()
		if spawned {
			break
		}
		time.Sleep(time.Millisecond)
	}
	f.h.BeginShutdown()
	select {
	case err := <-held:
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Kind != api.KindProviderFailed || !strings.Contains(err.Error(), errShuttingDown.Error()) {
			t.Fatalf("hold during the shutdown: %v, want provider_failed naming the shutdown", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the shutdown did not cancel the start in progress")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
