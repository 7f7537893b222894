package eviction

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunOrderAndAbort(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		failAt    int // -1: none
		wantRan   []string
		wantStep  string
		wantCompl []string
	}{
		{"all ok", -1, []string{"a", "b", "c"}, "", nil},
		{"first fails", 0, []string{"a"}, "a", nil},
		{"middle fails", 1, []string{"a", "b"}, "b", []string{"a"}},
		{"last fails", 2, []string{"a", "b", "c"}, "c", []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			var steps []Step
			for i, n := range []string{"a", "b", "c"} {
				steps = append(steps, Step{Name: n, Run: func(ctx context.Context) error {
					ran = append(ran, n)
					if i == tc.failAt {
						return boom
					}
					return nil
				}})
			}
			res, err := Run(context.Background(), steps)
			if !slices.Equal(ran, tc.wantRan) {
				t.Fatalf("ran %v, want %v", ran, tc.wantRan)
			}
			if len(res) != len(tc.wantRan) {
				t.Fatalf("results %d, want %d", len(res), len(tc.wantRan))
			}
			if tc.wantStep == "" {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				return
			}
			var se *Error
			if !errors.As(err, &se) || !errors.Is(err, boom) {
				t.Fatalf("err %v, want *Error wrapping boom", err)
			}
			if se.Step != tc.wantStep || !slices.Equal(se.Completed, tc.wantCompl) {
				t.Fatalf("step %q completed %v, want %q %v", se.Step, se.Completed, tc.wantStep, tc.wantCompl)
			}
			if res[len(res)-1].OK {
				t.Fatal("failed step reported ok")
			}
		})
	}
}

func TestRunStepTimeoutAbortsRest(t *testing.T) {
	release := make(chan struct{})
	stuckDone := make(chan struct{})
	laterRan := false
	steps := []Step{
		{Name: "stuck", Timeout: 20 * time.Millisecond, Run: func(ctx context.Context) error {
			defer close(stuckDone)
			<-release // ignores ctx on purpose: the runner must not wait for it
			return nil
		}},
		{Name: "later", Run: func(ctx context.Context) error { laterRan = true; return nil }},
	}
	_, err := Run(context.Background(), steps)
	var se *Error
	if !errors.As(err, &se) || se.Step != "stuck" || !errors.Is(err, ErrStepTimeout) {
		t.Fatalf("err %v, want timeout of step stuck", err)
	}
	if se.Abandoned == nil {
		t.Fatal("a step left running is not reported as abandoned")
	}
	select {
	case <-se.Abandoned:
		t.Fatal("abandoned closed while the step still runs")
	default:
	}
	close(release)
	<-stuckDone
	<-se.Abandoned
	if laterRan {
		t.Fatal("a step after the timed-out one ran")
	}
}

func TestRunCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	_, err := Run(ctx, []Step{{Name: "x", Run: func(context.Context) error { ran = true; return nil }}})
	if ran || !errors.Is(err, context.Canceled) {
		t.Fatalf("ran=%v err=%v", ran, err)
	}
}
