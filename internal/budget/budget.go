// Package budget holds the daemon's time budgets: the bounds of a stop,
// an eviction, a shutdown and a cleanup attempt, computed from the
// configured ladder and step timeout, and the saturating arithmetic they
// use. Every budget is non-negative, never wraps (a sum or product past
// the largest time.Duration is that largest value) and never shrinks when
// one of its inputs grows, whatever the inputs: a config error elsewhere
// cannot turn a long timeout into an expired one.
package budget

import (
	"math"
	"time"
)

// Max is the largest budget: about 292 years.
const Max = time.Duration(math.MaxInt64)

// Margins added to the ladder: the stop step's, a cleanup attempt's, and
// the daemon shutdown's.
const (
	StopMargin     = 2 * time.Second
	ReapMargin     = time.Second
	ShutdownMargin = 5 * time.Second
)

// Ladder is the close ladder's three waits; proc.Ladder and config.Ladder
// convert to it.
type Ladder struct {
	Grace, TermTimeout, KillTimeout time.Duration
}

// Add is the sum of ds, at most Max; a negative term counts as zero.
func Add(ds ...time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		if d <= 0 {
			continue
		}
		if d > Max-sum {
			return Max
		}
		sum += d
	}
	return sum
}

// Mul is n × d, at most Max; a negative factor counts as zero.
func Mul(n int64, d time.Duration) time.Duration {
	if n <= 0 || d <= 0 {
		return 0
	}
	if d > Max/time.Duration(n) {
		return Max
	}
	return time.Duration(n) * d
}

// Total is the whole ladder: grace, then term_timeout, then kill_timeout.
func (l Ladder) Total() time.Duration { return Add(l.Grace, l.TermTimeout, l.KillTimeout) }

// Stop bounds the eviction's stop step: the whole ladder and StopMargin.
func Stop(l Ladder) time.Duration { return Add(l.Total(), StopMargin) }

// Evict bounds one eviction attempt: the wait for a step left behind by
// the previous attempt (one step timeout), the stop step and the five
// other steps (a step timeout each).
func Evict(l Ladder, step time.Duration) time.Duration { return Add(Stop(l), Mul(6, step)) }

// EvictAll bounds the eviction of n sessions, parallel at a time: one
// Evict per batch (at least one batch).
func EvictAll(l Ladder, step time.Duration, n, parallel int) time.Duration {
	batches := int64(1)
	if n > 1 && parallel > 0 {
		batches = int64((n-1)/parallel + 1)
	}
	return Mul(batches, Evict(l, step))
}

// Shutdown bounds the daemon's shutdown after it stops taking calls:
// twice the ladder, four step timeouts and ShutdownMargin
// (docs/operations.md "Stopping").
func Shutdown(l Ladder, step time.Duration) time.Duration {
	return Add(Mul(2, l.Total()), Mul(4, step), ShutdownMargin)
}

// Reap bounds one cleanup attempt at a tree left behind: SIGTERM's wait,
// SIGKILL's wait and ReapMargin (no grace: stdin is long closed).
func Reap(l Ladder) time.Duration { return Add(l.TermTimeout, l.KillTimeout, ReapMargin) }
