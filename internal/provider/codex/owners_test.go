package codex

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRuntimeForgetsAbandonedRequests: a request the provider never
// answers (its caller gave up: ctx, timeout, stop) leaves nothing behind
// in the runtime's id space; a runtime serving an account for days
// would otherwise keep one entry, and the adapter that asked, per
// unanswered request. A late answer to it is a logged anomaly, given to
// nobody.
func TestRuntimeForgetsAbandonedRequests(t *testing.T) {
	fr := newFakeRuntime(t)
	f := fr.f
	go func() { _ = fr.rt.Handshake(testCtx(t)) }()
	f.reply(t, f.expect(t, "initialize"), map[string]any{})
	f.expect(t, "initialized")
	a, _ := fr.thread(t, "thr_A")
	fr.turn(t, a, "t_a", "pa")
	const n = 20
	var last map[string]any
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithCancel(testCtx(t))
		errc := make(chan error, 1)
		go func() { _, err := a.Interrupt(ctx); errc <- err }()
		last = f.expect(t, "turn/interrupt")
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupt %d: %v", i, err)
		}
	}
	fr.rt.mu.Lock()
	left := len(fr.rt.owners)
	fr.rt.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d abandoned requests still owned by the runtime, want 0", left)
	}
	f.reply(t, last, map[string]any{})
	// The reader counts the late answer after it reads it: wait, bounded.
	for deadline := time.Now().Add(10 * time.Second); fr.rt.Anomalies("response_unknown_id") != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a late answer to an abandoned request: anomalies %d, want 1", fr.rt.Anomalies("response_unknown_id"))
		}
	}
}
