package rpc

import (
	"log/slog"
	"testing"
	"time"
)

// TestCloseLinesRateLimited: 50 connections closed for bad framing are
// each counted (framingFaults) but logged at most closeLogBurst times per
// window; the rest is one summary line with the count. (Before: one WARN
// per connection, 39,123 lines in 5 s from one local client.)
func TestCloseLinesRateLimited(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	ts.srv.closeLog.every = time.Hour // one window for the whole test
	const conns = 50
	for range conns {
		r := ts.raw(t, FramingLines)
		r.write("hello there\n")
		r.expectClosed()
	}
	// the last close is counted after its socket closed
	waitState(t, func() bool { return ts.srv.stats.framingFaults.Load() == conns })
	if n := ts.logs.count("closing connection", "reason=bad_framing"); n != closeLogBurst {
		t.Fatalf("%d close lines for %d connections, want %d", n, conns, closeLogBurst)
	}
	ts.srv.Close() // writes the pending summary
	if n := ts.logs.count("connection close lines suppressed", "reason=bad_framing", "suppressed=40"); n != 1 {
		t.Fatalf("summary lines %d, want one with suppressed=40:\n%v", n, ts.logs.matching("suppressed"))
	}
}

// TestCloseLogWindow: past the burst a window's lines are suppressed, its
// summary comes at the window's end, and the next window writes again;
// reasons are limited apart.
func TestCloseLogWindow(t *testing.T) {
	logs := newLogRec()
	l := newCloseLog(slog.New(logs))
	l.every = 50 * time.Millisecond
	defer l.stop()
	allowed := 0
	for range closeLogBurst + 5 {
		if l.allow("bad_framing") {
			allowed++
		}
	}
	if allowed != closeLogBurst || !l.allow("malformed_json") {
		t.Fatalf("allowed %d of %d, want %d; another reason must have its own", allowed, closeLogBurst+5, closeLogBurst)
	}
	logs.waitFor(t, 1, "connection close lines suppressed", "reason=bad_framing", "suppressed=5")
	if !l.allow("bad_framing") {
		t.Fatal("the next window refused its first line")
	}
}
