package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
)

// figure is one measured number, with its target and (when one exists) a
// baseline measured in the same run.
type figure struct {
	Name     string
	Value    float64
	Unit     string
	Baseline float64 // 0: none
	Target   string  // "<= 100", ">= 0.5x", "" for information only
	OK       bool
	Note     string
}

// line renders the machine-readable form:
// bench: NAME VALUE UNIT baseline=VALUE ratio=X target=Y ok|MISS
func (f figure) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench: %s %s %s", f.Name, num(f.Value), f.Unit)
	if f.Baseline != 0 {
		fmt.Fprintf(&b, " baseline=%s ratio=%s", num(f.Baseline), num(f.ratio()))
	}
	switch {
	case f.Target == "":
		b.WriteString(" target=- info")
	case f.OK:
		fmt.Fprintf(&b, " target=%s ok", strings.ReplaceAll(f.Target, " ", ""))
	default:
		fmt.Fprintf(&b, " target=%s MISS", strings.ReplaceAll(f.Target, " ", ""))
	}
	return b.String()
}

func (f figure) ratio() float64 {
	if f.Baseline == 0 {
		return 0
	}
	return f.Value / f.Baseline
}

func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000 || v == float64(int64(v)):
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 0.01:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

// atMost and atLeast build a figure with a target and its verdict.
func atMost(name string, v float64, unit string, limit float64) figure {
	return figure{Name: name, Value: v, Unit: unit, Target: "<=" + num(limit), OK: v <= limit}
}

func atLeast(name string, v float64, unit string, limit float64) figure {
	return figure{Name: name, Value: v, Unit: unit, Target: ">=" + num(limit), OK: v >= limit}
}

// ratioAtLeast: value/baseline must reach r.
func ratioAtLeast(name string, v, base float64, unit string, r float64) figure {
	f := figure{Name: name, Value: v, Unit: unit, Baseline: base, Target: fmt.Sprintf("ratio>=%s", num(r))}
	f.OK = base > 0 && v/base >= r
	return f
}

func info(name string, v float64, unit string) figure {
	return figure{Name: name, Value: v, Unit: unit}
}

func printTable(w io.Writer, figs []figure) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "| figure\t| value\t| unit\t| baseline\t| ratio\t| target\t| verdict\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, f := range figs {
		base, ratio := "", ""
		if f.Baseline != 0 {
			base, ratio = num(f.Baseline), num(f.ratio())
		}
		verdict := "info"
		if f.Target != "" {
			verdict = "ok"
			if !f.OK {
				verdict = "MISS"
			}
		}
		fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %s\t| %s\t| %s\t| %s\t|\n", f.Name, num(f.Value), f.Unit, base, ratio, f.Target, verdict)
	}
	tw.Flush()
}

// pct returns the p-th percentile (0..100) of ds (sorted in place).
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(p / 100 * float64(len(ds)-1))
	return ds[i]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// machine describes this machine for docs/performance.md (the CPU model,
// memory and load come from machine_linux.go / machine_darwin.go).
func machine() string {
	var un unix.Utsname
	kernel := "?"
	if unix.Uname(&un) == nil {
		kernel = unix.ByteSliceToString(un.Release[:])
	}
	return fmt.Sprintf("machine: nproc=%d cpu=%q mem=%s kernel=%s go=%s loadavg=%s",
		runtime.NumCPU(), cpuModel(), totalMemory(), kernel, runtime.Version(), loadAvg())
}

// ratioAtMost: value/baseline must stay at or below r.
func ratioAtMost(name string, v, base float64, unit string, r float64) figure {
	f := figure{Name: name, Value: v, Unit: unit, Baseline: base, Target: fmt.Sprintf("ratio<=%s", num(r))}
	f.OK = base > 0 && v/base <= r
	return f
}
