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
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
)

var killRuntimes = flag.Bool("kill-runtimes", true, "TestChaosShared: SIGKILL runtimes mid-turn while the daemon lives")

// sharedConfig puts the echo profile on processes = "account": every
// session of the workload is a thread of one echo runtime.
const sharedConfig = "[providers.echo]\nprocesses = \"account\"\n"

// runtimeKiller SIGKILLs the runtime under a random session mid-turn
// (one with a turn running when there is one) while the daemon lives,
// then checks that no session of that runtime keeps a running turn or a
// live state on the dead pid: each got its tail (turn.completed
// {interrupted, provider_exited}, provider.exited, session.ended,
// lease.released) and the next hold starts a new runtime.
type runtimeKiller struct {
	socket  string
	rng     *rand.Rand
	kills   *atomic.Int64
	checked chan struct{} // closed once its kill was checked (or it gave up)

	mu         sync.Mutex
	violations []string
}

// run kills one runtime at a random moment of the round, checks its
// sessions, then closes checked (the round's daemon kill waits for it).
func (k *runtimeKiller) run(stop <-chan struct{}) {
	defer close(k.checked)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	c, err := rpc.Dial(ctx, k.socket, rpc.ClientOptions{Name: "chaos-runtime-killer"})
	cancel()
	if err != nil {
		return
	}
	defer c.Close()
	for range 2 { // a round with nothing live yet tries once more
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(100+k.rng.Intn(700)) * time.Millisecond): // the random kill moment
		}
		if killed, ok := k.step(c); killed || !ok {
			return
		}
	}
}

// step kills one runtime and checks its sessions: whether it killed
// one, and false once the daemon is gone.
func (k *runtimeKiller) step(c *rpc.Client) (bool, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sessions, err := c.ListAll(ctx)
	if err != nil {
		return false, false
	}
	var busy, live []api.SessionInfo
	for _, s := range sessions {
		if s.PID == 0 || s.State != "live" {
			continue
		}
		live = append(live, s)
		if s.TurnRunning {
			busy = append(busy, s)
		}
	}
	pick := busy
	if len(pick) == 0 {
		pick = live
	}
	if len(pick) == 0 {
		return false, true
	}
	victim := pick[k.rng.Intn(len(pick))]
	if syscall.Kill(victim.PID, syscall.SIGKILL) != nil {
		return false, true
	}
	k.kills.Add(1)
	// Every session that was on it leaves the dead pid (its tail is
	// written) within the bound; the round's daemon kill waits for this.
	deadline := time.Now().Add(8 * time.Second)
	for {
		sessions, err := c.ListAll(ctx)
		if err != nil {
			return true, false
		}
		var stuck []string
		for _, s := range sessions {
			if s.PID == victim.PID && (s.State == "live" || s.TurnRunning) {
				stuck = append(stuck, s.SessionID)
			}
		}
		if len(stuck) == 0 {
			return true, true
		}
		if time.Now().After(deadline) {
			slices.Sort(stuck)
			k.mu.Lock()
			k.violations = append(k.violations, fmt.Sprintf("runtime %s (pid %d) killed: sessions %v still on it after 10 s", victim.RuntimeID, victim.PID, stuck))
			k.mu.Unlock()
			return true, true
		}
		time.Sleep(20 * time.Millisecond) // no signal for another client's view of a session
	}
}

func (k *runtimeKiller) takeViolations() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	vs := k.violations
	k.violations = nil
	return vs
}

// checkRuntimeRecords: right after a restart, before any hold, no runtime
// record is left: startup reaped every crashed run's runtime by its
// record (or its tags) and deleted the record once it was proven gone
// (daemon.stats staleRuntimeRecords: the records no live runtime is).
func checkRuntimeRecords(ctx context.Context, c *rpc.Client) []string {
	var stats struct {
		Stale []map[string]any `json:"staleRuntimeRecords"`
	}
	if err := c.Call(ctx, "daemon.stats", nil, &stats); err != nil {
		return []string{fmt.Sprintf("daemon.stats: %v", err)}
	}
	if len(stats.Stale) != 0 {
		return []string{fmt.Sprintf("runtime records left right after restart, before any hold: %v", stats.Stale)}
	}
	return nil
}
