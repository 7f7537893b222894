package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// Eviction config: a short release clock and a short ladder, so the
// SIGTERM-ignoring child's figure is ≈ grace + term_timeout (then SIGKILL).
const (
	evictIdle  = 200 * time.Millisecond
	evictGrace = 300 * time.Millisecond
	evictTerm  = 300 * time.Millisecond
)

// benchEvict: time from the release clock firing to the child gone, for a
// cooperative echo child (exits on stdin EOF) and one that ignores both EOF
// and SIGTERM. Measured on the daemon's own clock: provider.exited's `at`
// (committed once Wait returned) minus the releaseAt that release answered.
func benchEvict(ctx context.Context, b *bench) ([]figure, error) {
	cfg := fmt.Sprintf(`idle_timeout = "%s"
[ladder]
grace = "%s"
term_timeout = "%s"
kill_timeout = "2s"
[providers.stubborn]
command = [%q, "provider", "echo", "--ignore-eof", "--ignore-sigterm"]
protocol = "codex-app-server"
env = { SESSIOND_ECHO_HOME = %q }
`, evictIdle, evictGrace, evictTerm, b.bin, b.dir("echohome"))
	d, err := b.startDaemon("", cfg)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	var mu sync.Mutex
	exited := map[string]chan time.Time{} // subscription id -> provider.exited at
	c, err := d.client(ctx, func(method string, p []byte) {
		if method != "agentSession.event" {
			return
		}
		var n api.EventNotice
		if json.Unmarshal(p, &n) != nil || n.Event.Type != event.ProviderExited {
			return
		}
		mu.Lock()
		ch := exited[n.SubscriptionID]
		mu.Unlock()
		if ch != nil {
			ch <- n.Event.At
		}
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sample := func(provider string) (time.Duration, error) {
		var si api.SessionInfo
		if err := c.Call(ctx, "agentSession.create", api.CreateParams{Provider: provider, Cwd: b.root}, &si); err != nil {
			return 0, err
		}
		var hr api.HoldResult
		if err := c.Call(ctx, "agentSession.hold", api.HoldParams{SessionID: si.SessionID, HolderID: "e"}, &hr); err != nil {
			return 0, err
		}
		if err := c.Call(ctx, "agentSession.get", api.SessionParams{SessionID: si.SessionID}, &si); err != nil {
			return 0, err
		}
		var ar api.AttachResult
		if err := c.Call(ctx, "agentSession.attach", api.AttachParams{SessionID: si.SessionID, AfterSeq: si.LastSeq, Limit: 1}, &ar); err != nil {
			return 0, err
		}
		ch := make(chan time.Time, 1)
		mu.Lock()
		exited[ar.SubscriptionID] = ch
		mu.Unlock()
		var rr api.ReleaseResult
		if err := c.Call(ctx, "agentSession.release", api.ReleaseParams{SessionID: si.SessionID, HolderID: "e", HoldToken: hr.HoldToken}, &rr); err != nil {
			return 0, err
		}
		if rr.ReleaseAt == nil {
			return 0, errors.New("evict: release answered no releaseAt")
		}
		select {
		case at := <-ch:
			var none struct{}
			c.Call(ctx, "agentSession.detach", api.DetachParams{SubscriptionID: ar.SubscriptionID}, &none)
			return at.Sub(*rr.ReleaseAt), nil
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("evict %s: no provider.exited within 30 s", si.SessionID)
		}
	}
	collect := func(provider string, n int) ([]time.Duration, error) {
		var out []time.Duration
		for i := 0; i < n; i++ {
			dt, err := sample(provider)
			if err != nil {
				return out, err
			}
			out = append(out, dt)
		}
		return out, nil
	}
	coop, err := collect("echo", b.sz.evictCoop)
	if err != nil {
		return nil, err
	}
	stub, err := collect("stubborn", b.sz.evictStubborn)
	if err != nil {
		return nil, err
	}
	ladder := ms(evictGrace + evictTerm)
	return []figure{
		atMost("evict.cooperative_p50", ms(pct(coop, 50)), "ms", 50),
		atMost("evict.cooperative_max", ms(pct(coop, 100)), "ms", 50),
		// ≈ the ladder: within 100 ms past grace + term_timeout.
		atMost("evict.sigterm_ignoring_p50", ms(pct(stub, 50)), "ms", ladder+100),
	}, nil
}
