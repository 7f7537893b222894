// Package eviction runs teardown as data: a named, ordered list of steps,
// each under its own deadline. The first failure or timeout aborts the rest
// and is reported with the step that failed and those that completed, so a
// retry knows exactly where the last attempt stopped. Steps must be
// idempotent: a retry runs the whole list again.
package eviction

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Step is one named teardown step.
type Step struct {
	Name    string
	Run     func(ctx context.Context) error
	Timeout time.Duration // 0: no deadline of its own
}

// Result is what one step did.
type Result struct {
	Name     string
	OK       bool
	Duration time.Duration
	Err      error
}

// Error is a run that stopped at a step.
type Error struct {
	Step      string   // the step that failed or timed out
	Completed []string // the steps that ran to completion before it
	Err       error    // the step's error (context.DeadlineExceeded on a timeout)
	// Abandoned is non-nil when the step timed out and was left running:
	// it is closed once that step returns. A retry must wait for it, or
	// the old step and the new one run side by side.
	Abandoned <-chan struct{}
}

func (e *Error) Error() string {
	return fmt.Sprintf("step %s failed after [%s]: %v", e.Step, strings.Join(e.Completed, " "), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrStepTimeout wraps a step that ran past its deadline.
var ErrStepTimeout = errors.New("step timed out")

// Run runs steps in order. It returns every step that ran (the failed one
// last) and, on failure, an *Error. A step that does not return by its
// deadline is reported as timed out and left behind: Run does not wait for
// it, so a stuck step cannot wedge the caller (its ctx is cancelled).
func Run(ctx context.Context, steps []Step) ([]Result, error) {
	results := make([]Result, 0, len(steps))
	var completed []string
	for _, s := range steps {
		start := time.Now()
		abandoned, err := runOne(ctx, s)
		r := Result{Name: s.Name, OK: err == nil, Duration: time.Since(start), Err: err}
		results = append(results, r)
		if err != nil {
			return results, &Error{Step: s.Name, Completed: completed, Err: err, Abandoned: abandoned}
		}
		completed = append(completed, s.Name)
	}
	return results, nil
}

// runOne runs a step under its deadline. When the step outlives it, the
// returned channel is closed once the step finally returns.
func runOne(ctx context.Context, s Step) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if s.Timeout > 0 {
		sctx, cancel = context.WithTimeout(ctx, s.Timeout)
	}
	defer cancel()
	done := make(chan error, 1)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		done <- s.Run(sctx)
	}()
	select {
	case err := <-done:
		return nil, err
	case <-sctx.Done():
		// Prefer a result that raced with the deadline.
		select {
		case err := <-done:
			return nil, err
		default:
		}
		if errors.Is(sctx.Err(), context.DeadlineExceeded) {
			return returned, fmt.Errorf("%w after %s: %w", ErrStepTimeout, s.Timeout, sctx.Err())
		}
		return returned, sctx.Err()
	}
}
