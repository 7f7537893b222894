package budget

import (
	"math/big"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/sessiond/sessiond/internal/config"
)

// exact is the reference: the true value of a budget formula over
// unbounded integers, negative inputs taken as zero, capped at Max.
type exact struct{ v *big.Int }

func ex(d time.Duration) exact { return exact{big.NewInt(max(int64(d), 0))} }

func (e exact) add(o exact) exact { return exact{new(big.Int).Add(e.v, o.v)} }

func (e exact) mul(n int64) exact { return exact{new(big.Int).Mul(e.v, big.NewInt(max(n, 0)))} }

func (e exact) capped() time.Duration {
	if e.v.Cmp(big.NewInt(int64(Max))) > 0 {
		return Max
	}
	return time.Duration(e.v.Int64())
}

// anyDuration draws from the whole int64 range, with the edges (0, ±1,
// Max, MinInt64, near Max) likely.
func anyDuration(t *rapid.T, label string) time.Duration {
	return time.Duration(rapid.OneOf(
		rapid.Int64(),
		rapid.SampledFrom([]int64{0, 1, -1, int64(Max), int64(Max) - 1, -int64(Max) - 1, int64(Max) / 2, int64(Max)/2 + 1, int64(Max) / 6, int64(Max) / 4}),
		rapid.Int64Range(0, int64(1000000*time.Hour)),
	).Draw(t, label))
}

func anyLadder(t *rapid.T) Ladder {
	return Ladder{anyDuration(t, "grace"), anyDuration(t, "term"), anyDuration(t, "kill")}
}

func exactTotal(l Ladder) exact { return ex(l.Grace).add(ex(l.TermTimeout)).add(ex(l.KillTimeout)) }

// formulas are every budget with its reference, over (ladder, step, n).
var formulas = []struct {
	name  string
	got   func(l Ladder, step time.Duration, n int) time.Duration
	exact func(l Ladder, step time.Duration, n int) exact
}{
	{"Total", func(l Ladder, _ time.Duration, _ int) time.Duration { return l.Total() },
		func(l Ladder, _ time.Duration, _ int) exact { return exactTotal(l) }},
	{"Stop", func(l Ladder, _ time.Duration, _ int) time.Duration { return Stop(l) },
		func(l Ladder, _ time.Duration, _ int) exact { return exactTotal(l).add(ex(StopMargin)) }},
	{"Evict", func(l Ladder, s time.Duration, _ int) time.Duration { return Evict(l, s) },
		func(l Ladder, s time.Duration, _ int) exact {
			return exactTotal(l).add(ex(StopMargin)).add(ex(s).mul(6))
		}},
	{"EvictAll", func(l Ladder, s time.Duration, n int) time.Duration { return EvictAll(l, s, n, 32) },
		func(l Ladder, s time.Duration, n int) exact {
			batches := max(int64((n+31)/32), 1)
			return exactTotal(l).add(ex(StopMargin)).add(ex(s).mul(6)).mul(batches)
		}},
	{"Shutdown", func(l Ladder, s time.Duration, _ int) time.Duration { return Shutdown(l, s) },
		func(l Ladder, s time.Duration, _ int) exact {
			return exactTotal(l).mul(2).add(ex(s).mul(4)).add(ex(ShutdownMargin))
		}},
	{"Reap", func(l Ladder, _ time.Duration, _ int) time.Duration { return Reap(l) },
		func(l Ladder, _ time.Duration, _ int) exact {
			return ex(l.TermTimeout).add(ex(l.KillTimeout)).add(ex(ReapMargin))
		}},
}

// TestBudgetsSaturate: whatever the inputs (the whole int64 range,
// negatives included), every budget is the true value of its formula
// capped at Max: never negative, never wrapped.
func TestBudgetsSaturate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, step := anyLadder(t), anyDuration(t, "step")
		n := rapid.IntRange(-1, 1<<40).Draw(t, "sessions")
		for _, f := range formulas {
			got, want := f.got(l, step, n), f.exact(l, step, n).capped()
			if got < 0 || got != want {
				t.Fatalf("%s(%+v, step %d, n %d) = %d, want %d", f.name, l, step, n, got, want)
			}
		}
	})
}

// TestBudgetsMonotonic: growing any one input never shrinks a budget.
func TestBudgetsMonotonic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, step := anyLadder(t), anyDuration(t, "step")
		n := rapid.IntRange(0, 1<<20).Draw(t, "sessions")
		grow := time.Duration(rapid.Int64Range(0, int64(Max)).Draw(t, "grow"))
		up := func(d time.Duration) time.Duration { return Add(d, grow) } // saturating: stays ≥ d
		bigger := []struct {
			what string
			l    Ladder
			step time.Duration
			n    int
		}{
			{"grace", Ladder{up(l.Grace), l.TermTimeout, l.KillTimeout}, step, n},
			{"term", Ladder{l.Grace, up(l.TermTimeout), l.KillTimeout}, step, n},
			{"kill", Ladder{l.Grace, l.TermTimeout, up(l.KillTimeout)}, step, n},
			{"step", l, up(step), n},
			{"sessions", l, step, n + rapid.IntRange(0, 1<<20).Draw(t, "more")},
		}
		for _, f := range formulas {
			base := f.got(l, step, n)
			for _, b := range bigger {
				if got := f.got(b.l, b.step, b.n); got < base {
					t.Fatalf("%s shrank from %d to %d when %s grew", f.name, base, got, b.what)
				}
			}
		}
	})
}

// TestAddMul: the helpers themselves against big integers.
func TestAddMul(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := anyDuration(t, "a"), anyDuration(t, "b"), anyDuration(t, "c")
		if got, want := Add(a, b, c), ex(a).add(ex(b)).add(ex(c)).capped(); got != want {
			t.Fatalf("Add(%d, %d, %d) = %d, want %d", a, b, c, got, want)
		}
		n := rapid.OneOf(rapid.Int64(), rapid.Int64Range(-2, 64)).Draw(t, "n")
		if got, want := Mul(n, a), ex(a).mul(n).capped(); got != want {
			t.Fatalf("Mul(%d, %d) = %d, want %d", n, a, got, want)
		}
	})
	if Add() != 0 || Add(Max, 1) != Max || Mul(2, Max) != Max || Mul(-1, time.Second) != 0 {
		t.Fatal("edge values")
	}
}

// TestBudgetsAtConfigMaxima: with every config key at the top of its
// range the budgets are exact (nowhere near saturation), and a config
// cannot reach the overflow the formulas guard against.
func TestBudgetsAtConfigMaxima(t *testing.T) {
	top := map[string]time.Duration{}
	for _, r := range config.DurationRanges {
		top[r.Key] = r.Max
	}
	l := Ladder{top["ladder.grace"], top["ladder.term_timeout"], top["ladder.kill_timeout"]}
	step := top["step_timeout"]
	n := 1 << 20 // more live sessions than connections can hold
	for _, f := range formulas {
		got, want := f.got(l, step, n), f.exact(l, step, n)
		if want.v.Cmp(big.NewInt(int64(Max/8))) >= 0 || got != want.capped() {
			t.Errorf("%s at the config maxima = %s, want exactly %s, far below Max", f.name, got, want.capped())
		}
	}
	if got, want := Shutdown(l, step), 5*time.Hour+5*time.Second; got != want {
		t.Errorf("Shutdown at the config maxima = %s, want %s (docs/protocol.md \"Configuration\")", got, want)
	}
	d := config.Default()
	if got := Shutdown(Ladder(d.Ladder), d.StepTimeout); got != 54*time.Second {
		t.Errorf("Shutdown of the defaults = %s, want 54s (docs/operations.md)", got)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
