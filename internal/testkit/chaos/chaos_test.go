package chaos

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

var (
	rounds = flag.Int("rounds", 10, "kill/restart rounds")
	seed   = flag.Int64("seed", 0, "random seed (0: from the clock); printed to replay a run")
	attack = flag.Bool("hostile", true, "run a hostile client beside the workers")
	mode   = flag.String("mode", "cgroup", "supervision mode the daemon must run in: cgroup (the workload adds /escape) or fallback")
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// chaosConfig keeps every timing small so a round is short.
const chaosConfig = `idle_timeout = "300ms"
start_timeout = "10s"
[ladder]
grace = "200ms"
term_timeout = "300ms"
kill_timeout = "500ms"
`

const workers = 3

// totals are the figures of the summary line.
type totals struct {
	rounds, operations, orphans, eventsChecked, turnsChecked, violations int
}

// TestChaos runs the real daemon under a randomized workload from several
// clients, kills it with SIGKILL at a random moment, restarts it on the
// same state and checks the crash-safety invariants after every restart.
func TestChaos(t *testing.T) { runChaos(t, false) }

// TestChaosShared is TestChaos with the echo profile on processes =
// "account" (every session a thread of one runtime) and a client that
// SIGKILLs runtimes mid-turn beside the daemon's own kills.
func TestChaosShared(t *testing.T) { runChaos(t, true) }

func runChaos(t *testing.T, shared bool) {
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("chaos: seed=%d rounds=%d (replay with -args -seed=%d -rounds=%d)", s, *rounds, s, *rounds)
	rng := rand.New(rand.NewSource(s))
	rec := newRecorder()
	p := &pool{}
	cwd := t.TempDir()
	var ops, hostileOps atomic.Int64
	var tot totals
	report := func(round int, vs []string) {
		for _, v := range vs {
			t.Errorf("seed %d round %d: VIOLATION %s", s, round, v)
		}
		tot.violations += len(vs)
	}

	cfg := chaosSetup(t)
	var kills atomic.Int64
	if shared {
		cfg += sharedConfig
	}
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	requireMode(t, d)
	stateDir := d.StateDir
	for round := 1; round <= *rounds; round++ {
		// Workload, then SIGKILL at a random moment of it.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range workers {
			w := &worker{name: fmt.Sprintf("w%d", i), socket: d.Socket, cwd: cwd, pool: p, rec: rec, ops: &ops,
				rng: rand.New(rand.NewSource(rng.Int63())), tokens: map[string]string{}}
			wg.Add(1)
			go func() { defer wg.Done(); w.run(stop) }()
		}
		if *attack {
			h := &hostile{socket: d.Socket, cwd: cwd, pool: p, ops: &hostileOps, rng: rand.New(rand.NewSource(rng.Int63()))}
			wg.Add(1)
			go func() { defer wg.Done(); h.run(stop) }()
		}
		var killer *runtimeKiller
		if shared && *killRuntimes {
			killer = &runtimeKiller{socket: d.Socket, rng: rand.New(rand.NewSource(rng.Int63())), kills: &kills, checked: make(chan struct{})}
			wg.Add(1)
			go func() { defer wg.Done(); killer.run(stop) }()
		}
		time.Sleep(time.Duration(50+rng.Intn(1200)) * time.Millisecond) // the random kill moment (not a wait for anything)
		if killer != nil {
			<-killer.checked // its runtime kill checked while the daemon lives
		}
		d.Kill()
		close(stop)
		wg.Wait()
		// Processes the dead daemon left: the restart must reap them.
		left := leftBehind(d)
		tot.orphans += len(left)

		d = daemontest.Start(t, daemontest.Options{Config: cfg, StateDir: stateDir})
		requireMode(t, d)
		c := d.Client(t)
		vs := rec.takeViolations()
		if killer != nil {
			vs = append(vs, killer.takeViolations()...)
		}
		vs = append(vs, checkReaped(d, left)...)
		if pids := daemontest.TaggedProcesses(d.StateID); len(pids) != 0 {
			vs = append(vs, fmt.Sprintf("tagged processes alive right after restart, before any hold: %v\n%s", pids, d.Log.String()))
		}
		if shared {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			vs = append(vs, checkRuntimeRecords(ctx, d.Client(t, api.CapAdmin))...)
			cancel()
		}
		checked, turns, more := checkRestarted(t, c, rec, p.all())
		tot.eventsChecked += checked
		tot.turnsChecked += turns
		vs = append(vs, more...)
		vs = append(vs, holdEach(t, c, d.StateID, p.all())...)
		vs = append(vs, checkNoCgroups(d)...)
		report(round, vs)
		tot.rounds = round
		if t.Failed() && testing.Short() {
			break
		}
	}
	d.Kill()
	tot.operations = int(ops.Load())
	line := fmt.Sprintf("chaos: shared=%v rounds=%d operations=%d hostile_operations=%d runtime_kills=%d orphans_found=%d events_checked=%d turns_checked=%d violations=%d seed=%d",
		shared, tot.rounds, tot.operations, hostileOps.Load(), kills.Load(), tot.orphans, tot.eventsChecked, tot.turnsChecked, tot.violations, s)
	t.Log(line)
	fmt.Println(line)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// listSessions returns the daemon's view by id.
func listSessions(t *testing.T, c *rpc.Client) map[string]api.SessionInfo {
	sessions, err := c.ListAll(ctxT(t)) // every page
	if err != nil {
		t.Fatalf("agentSession.list: %v", err)
	}
	out := map[string]api.SessionInfo{}
	for _, s := range sessions {
		out[s.SessionID] = s
	}
	return out
}

// holdEach holds every session, checks the live children own every tagged
// process, then closes them all and checks nothing tagged is left.
func holdEach(t *testing.T, c *rpc.Client, stateID string, ids []string) []string {
	var vs []string
	for _, id := range ids {
		var r api.HoldResult
		if err := c.Call(ctxT(t), "agentSession.hold", api.HoldParams{SessionID: id, HolderID: "chaos-check"}, &r); err != nil {
			vs = append(vs, fmt.Sprintf("session %s cannot be held again after restart: %v", id, err))
		}
	}
	held, tagged := listSessions(t, c), daemontest.TaggedProcesses(stateID)
	for _, id := range ids {
		if s := held[id]; s.Lease != "live" || s.State != "live" || s.PID == 0 || !slices.Contains(tagged, s.PID) {
			vs = append(vs, fmt.Sprintf("session %s held: lease %s state %s pid %d is not a live tagged child of this daemon",
				id, s.Lease, s.State, s.PID))
		}
	}
	vs = append(vs, checkOwned(held, tagged)...)
	for _, id := range ids {
		var r api.CloseResult
		if err := c.Call(ctxT(t), "agentSession.close", api.SessionParams{SessionID: id}, &r); err != nil {
			vs = append(vs, fmt.Sprintf("session %s: close after the check hold: %v", id, err))
		}
	}
	for id, s := range listSessions(t, c) {
		if s.Lease != "released" || s.PID != 0 {
			vs = append(vs, fmt.Sprintf("session %s after close: lease %s pid %d", id, s.Lease, s.PID))
		}
	}
	// A closed tree not proven gone goes to bounded cleanup: poll briefly.
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := daemontest.TaggedProcesses(stateID)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			vs = append(vs, fmt.Sprintf("tagged processes alive after closing every session: %v", pids))
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			break
		}
		time.Sleep(20 * time.Millisecond) // no signal for another process's exit
	}
	return vs
}
