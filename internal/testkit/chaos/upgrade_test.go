package chaos

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

var upgrades = flag.Int("upgrades", 3, "live upgrades in a row (TestChaosUpgrade)")

// TestChaosUpgrade runs the workload and, at a random moment of each round,
// live-upgrades the daemon, alternating between two builds. After every
// upgrade: same pid, the other build's version, no event a client saw lost
// or changed, journals gapless, no sign of a restart (nothing ended
// daemon_restart), every completed turn's deltas whole. At the end every
// session is held, checked and closed as after the crash rounds.
func TestChaosUpgrade(t *testing.T) { runChaosUpgrade(t, false) }

// TestChaosUpgradeShared is TestChaosUpgrade with the echo profile on
// processes = "account": every session is a thread of one runtime, handed
// over with its turns streaming, approvals open and sessions closing;
// after the last upgrade the daemon is stopped and nothing it ran (no
// runtime, no descendant) may be left.
func TestChaosUpgradeShared(t *testing.T) { runChaosUpgrade(t, true) }

func runChaosUpgrade(t *testing.T, shared bool) {
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("chaos upgrade: seed=%d upgrades=%d", s, *upgrades)
	rng := rand.New(rand.NewSource(s))
	rec := newRecorder()
	p := &pool{}
	cwd := t.TempDir()
	builds := []struct{ path, version string }{
		{daemontest.BinaryVersion(t, "v0.0.0-chaos-b"), "v0.0.0-chaos-b"},
		{daemontest.BinaryVersion(t, "v0.0.0-chaos-a"), "v0.0.0-chaos-a"},
	}
	cfg := chaosConfig
	if shared {
		cfg += sharedConfig
	}
	d := daemontest.Start(t, daemontest.Options{Config: cfg})
	pid := d.Status(t).PID
	var ops, hostileOps atomic.Int64
	violations, refusals, checked := 0, 0, 0
	var handoverKills int // runtimes SIGKILLed around a handover (written by one goroutine per round, read after wg.Wait)
	var worst time.Duration
	for round := 1; round <= *upgrades; round++ {
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
		time.Sleep(time.Duration(50+rng.Intn(1200)) * time.Millisecond) // the random upgrade moment (not a wait for anything)
		b := builds[round%2]
		var res api.UpgradeResult
		start := time.Now()
		if shared && *killRuntimes && rng.Intn(2) == 0 {
			// Every other round on average, a runtime is SIGKILLed at a
			// random moment around the handover (while frozen, between the
			// images, while adopted or just after): its sessions must get
			// their tails (provider_exited), nothing may be left running.
			var st rpc.Status
			if err := d.Client(t, api.CapRuntimes).Call(ctxT(t), "daemon.status", struct{}{}, &st); err == nil && len(st.Runtimes) > 0 {
				victim, after := st.Runtimes[rng.Intn(len(st.Runtimes))].PID, time.Duration(rng.Intn(400))*time.Millisecond
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(after) // the random kill moment (not a wait for anything)
					if syscall.Kill(victim, syscall.SIGKILL) == nil {
						handoverKills++
					}
				}()
			}
		}
		for try := 1; ; try++ {
			c := d.Client(t)
			err := c.Call(ctxT(t), "daemon.upgrade", api.UpgradeParams{Binary: b.path}, &res)
			var re *rpc.Error
			if err == nil {
				break
			}
			if !errors.As(err, &re) || re.Reason != "upgrade_refused" || try == 5 {
				t.Fatalf("seed %d round %d: upgrade: %v\n%s", s, round, err, d.Log.String())
			}
			refusals++
			t.Logf("round %d: upgrade refused (retrying): %v", round, re.Data["cause"])
			// "try again": a runtime that died (a /crash turn ends the whole
			// shared process) is still tearing its sessions down; no signal
			// of that reaches a client.
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		}
		worst = max(worst, time.Since(start))
		close(stop)
		wg.Wait()
		c := d.Client(t)
		vs := rec.takeViolations()
		st := d.Status(t)
		if st.PID != pid || st.Version != b.version || res.PID != pid || res.ToVersion != b.version {
			vs = append(vs, fmt.Sprintf("after the upgrade: pid %d version %s (answer %+v); want pid %d version %s", st.PID, st.Version, res, pid, b.version))
		}
		n, more := checkUpgraded(t, c, rec, p.all())
		checked += n
		vs = append(vs, more...)
		for _, v := range vs {
			t.Errorf("seed %d round %d: VIOLATION %s", s, round, v)
		}
		violations += len(vs)
		if t.Failed() {
			break
		}
	}
	vs := holdEach(t, d.Client(t), d.StateID, p.all())
	for _, v := range vs {
		t.Errorf("seed %d final check: VIOLATION %s", s, v)
	}
	violations += len(vs)
	d.Stop()
	orphans := daemontest.TaggedProcesses(d.StateID)
	for _, pid := range orphans {
		t.Errorf("seed %d: VIOLATION pid %d still runs after the daemon stopped", s, pid)
	}
	violations += len(orphans)
	line := fmt.Sprintf("chaos upgrade: shared=%v handover_kills=%d upgrades=%d refused_and_retried=%d operations=%d hostile_operations=%d events_checked=%d longest_upgrade_ms=%d orphans=%d violations=%d seed=%d",
		shared, handoverKills, *upgrades, refusals, ops.Load(), hostileOps.Load(), checked, worst.Milliseconds(), len(orphans), violations, s)
	t.Log(line)
	fmt.Println(line)
}

// checkUpgraded checks a daemon right after a live upgrade: every journal
// gapless, every event a client saw still there and identical, no event
// ended daemon_restart (the upgrade is not a restart), and every completed
// turn's deltas adding up to its message.
func checkUpgraded(t *testing.T, c *rpc.Client, rec *recorder, ids []string) (int, []string) {
	var vs []string
	checked := 0
	for _, id := range ids {
		evs, err := readAll(t, c, id)
		if err != nil {
			vs = append(vs, fmt.Sprintf("session %s: read journal: %v", id, err))
			continue
		}
		bySeq := map[uint64]event.Event{}
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) {
				vs = append(vs, fmt.Sprintf("session %s: seq gap: event %d has seq %d", id, i+1, ev.Seq))
				break
			}
			bySeq[ev.Seq] = ev
			var d struct {
				Reason string `json:"reason"`
			}
			if json.Unmarshal(ev.Data, &d) == nil && d.Reason == event.ReasonDaemonRestart {
				vs = append(vs, fmt.Sprintf("session %s: the upgrade looked like a restart: %s", id, describe(ev)))
			}
		}
		_, lost := checkDeltas(id, evs)
		vs = append(vs, lost...)
		for seq, seen := range rec.snapshot(id) {
			checked++
			if got, ok := bySeq[seq]; !ok {
				vs = append(vs, fmt.Sprintf("session %s: event seen by a client is lost: %s", id, describe(seen)))
			} else if !sameEvent(got, seen) {
				vs = append(vs, fmt.Sprintf("session %s: event changed: seen %s, journal %s", id, describe(seen), describe(got)))
			}
		}
	}
	if len(vs) > 20 {
		vs = append(vs[:20], fmt.Sprintf("… %d more", len(vs)-20))
	}
	return checked, vs
}
