// Command sessiond-bench starts the real daemon, measures the figures of
// docs/performance.md against their targets (and, where one exists, a
// baseline measured in the same run, A/B interleaved) and prints one line
// per figure, then a table.
//
//	go run ./cmd/sessiond-bench [--smoke] [--sessiond PATH] [--only a,b]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == echoServerFlag {
		os.Exit(echoServerMain(os.Args[2]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sessiond-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	smoke := fs.Bool("smoke", false, "tiny sizes: every figure, a few hundred operations, < 30 s")
	bin := fs.String("sessiond", "", "sessiond binary (default: go build ./cmd/sessiond into a temp dir)")
	only := fs.String("only", "", "comma-separated groups to run: rpc,events,items,codex,runtimes,codex-acp,claude,idle,probe,replay,startup,evict,cgroup,upgrade (default all)")
	keep := fs.Bool("keep", false, "keep the temp dir (daemon logs) for inspection")
	compare := fs.String("compare", "", "a second sessiond binary: each group runs twice per binary, alternating A B A B; B's figures end in @b")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	sz := fullSizes()
	if *smoke {
		sz = smokeSizes()
	}
	b, err := newBench(*bin, sz, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sessiond-bench:", err)
		return 1
	}
	if !*keep {
		defer b.cleanup()
	} else {
		fmt.Fprintln(stderr, "sessiond-bench: keeping", b.root)
	}
	ctx := context.Background()
	start := time.Now()
	failed := false
	for _, st := range schedule(*only, b.bin, *compare) {
		g, side := st.group, st.side
		b.bin = side.bin
		fmt.Fprintf(stderr, "sessiond-bench: %s%s ...\n", g.name, side.suffix)
		figs, err := g.run(ctx, b)
		for _, f := range figs {
			f.Name += side.suffix
			fmt.Fprintln(stdout, f.line())
			b.figs = append(b.figs, f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "sessiond-bench: %s: %v\n", g.name, err)
			failed = true
		}
	}
	fmt.Fprintln(stdout)
	printTable(stdout, b.figs)
	fmt.Fprintf(stdout, "\n%s; total %.1fs\n", machine(), time.Since(start).Seconds())
	if failed {
		return 1
	}
	return 0
}

type side struct{ bin, suffix string }

// step is one group run against one binary.
type step struct {
	group group
	side  side
}

// schedule lists the runs in order: each selected group (only: comma-
// separated names, "" for all) against a alone, or A B A B with compare
// (every group from a and compare, whatever ran before it).
func schedule(only, a, compare string) []step {
	var out []step
	for _, g := range groups {
		if only != "" && !contains(strings.Split(only, ","), g.name) {
			continue
		}
		for _, sd := range sides(a, compare) {
			out = append(out, step{g, sd})
		}
	}
	return out
}

// sides is the order binaries run in: A alone, or A B A B with --compare.
func sides(a, b string) []side {
	if b == "" {
		return []side{{a, ""}}
	}
	return []side{{a, "@a"}, {b, "@b"}, {a, "@a"}, {b, "@b"}}
}

type group struct {
	name string
	run  func(context.Context, *bench) ([]figure, error)
}

var groups = []group{
	{"rpc", benchRPC},
	{"events", benchEvents},
	{"items", benchItems},
	{"codex", benchCodex},
	{"runtimes", benchRuntimes},
	{"codex-acp", benchCodexACP},
	{"claude", benchClaude},
	{"idle", benchIdle},
	{"probe", benchProbe},
	{"replay", benchReplay},
	{"startup", benchStartup},
	{"evict", benchEvict},
	{"cgroup", benchCgroup},
	{"upgrade", benchUpgrade},
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

// sizes are the knobs that differ between the full run and --smoke.
type sizes struct {
	rpcCalls                                      int           // single-client calls per figure (half daemon, half baseline)
	thrClients                                    int           // concurrent clients
	thrRound                                      time.Duration // one A or B round of the throughput figure
	thrRounds                                     int           // A/B pairs
	floodN                                        int           // deltas in the /flood
	idleSessions                                  int           // held idle sessions
	idleFor                                       time.Duration // idle measuring window
	settleFor                                     time.Duration // at most this long for the runtime's back-off before an idle window (settle.go)
	probeN                                        int           // identities per sweep
	psN                                           int           // ps spawns (one identity each)
	replayEvents                                  int           // events in the replayed journal
	startSessions                                 int           // stored sessions for startup
	startEvents                                   int           // events per stored session
	startRuns                                     int           // startups measured (each A/B against an empty state dir)
	evictCoop                                     int           // cooperative evictions measured
	evictStubborn                                 int           // SIGTERM-ignoring evictions measured
	cgroupSamples                                 int           // hold/close samples per supervision mode
	codexTurns                                    int           // real codex turns measured
	upgradeSessions, upgradeFloods, upgradeFloodN int           // live sessions across a live upgrade, how many stream a flood, its deltas
	rtIdleSessions                                int           // per-session codex sessions held for PSS and cold holds
	rtTurns                                       int           // concurrent turns on one codex runtime
	rtModelDelay                                  time.Duration // the scripted model's latency per reply (runtimes)
}

func fullSizes() sizes {
	return sizes{rpcCalls: 20000, thrClients: 32, thrRound: time.Second, thrRounds: 3, floodN: 100000,
		idleSessions: 200, idleFor: 30 * time.Second, settleFor: 65 * time.Second, probeN: 1000, psN: 100, replayEvents: 100000,
		startSessions: 10000, startEvents: 100, startRuns: 3, evictCoop: 10, evictStubborn: 3, codexTurns: 5,
		cgroupSamples: 20, upgradeSessions: 100, upgradeFloods: 4, upgradeFloodN: 200000,
		rtIdleSessions: 6, rtTurns: 20, rtModelDelay: time.Second}
}

func smokeSizes() sizes {
	return sizes{rpcCalls: 200, thrClients: 4, thrRound: 100 * time.Millisecond, thrRounds: 1, floodN: 500,
		idleSessions: 5, idleFor: 2 * time.Second, probeN: 100, psN: 3, replayEvents: 2000,
		startSessions: 20, startEvents: 10, startRuns: 1, evictCoop: 1, evictStubborn: 1, codexTurns: 1,
		cgroupSamples: 2, upgradeSessions: 3, upgradeFloods: 1, upgradeFloodN: 5000,
		rtIdleSessions: 3, rtTurns: 2, rtModelDelay: 200 * time.Millisecond}
}
