package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"
)

// settleRuntime returns once the Go runtime of each daemon in pids has
// spent the back-off left over from the activity before an idle window, or
// after limit. The window would otherwise count that back-off as idle
// cost.
//
// Measured here (strace and perf sched of two idle daemons with 200 held
// sessions): sysmon polls every 20 µs while a program is busy and doubles
// the delay only after 50 quiet polls. When every P goes idle it sleeps
// with that state, until the next timer or 60 s, and on waking spends the
// remaining polls: about 55 context switches in 25 ms. One such burst in a
// 30 s window adds 1.8/s to whichever daemon it lands in, cgroup or
// fallback mode alike; every later wake costs 2 or 3 switches.
//
// So: wait until each daemon's sysmon thread has woken once since the
// settle began, then let its burst finish.
func settleRuntime(pids []int, limit time.Duration) time.Duration {
	t0 := time.Now()
	if limit <= 0 {
		return 0
	}
	type watch struct {
		pid   int
		tid   int
		start uint64
		woke  time.Time
	}
	ws := make([]watch, 0, len(pids))
	for _, pid := range pids {
		tid, err := sysmonTID(pid)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: settle: %v\n", err)
			continue
		}
		ws = append(ws, watch{pid: pid, tid: tid, start: threadSwitches(pid, tid)})
	}
	const burst = 300 * time.Millisecond // the burst lasts ~25 ms
	for time.Since(t0) < limit {
		done := true
		for i := range ws {
			w := &ws[i]
			if w.woke.IsZero() && threadSwitches(w.pid, w.tid) != w.start {
				w.woke = time.Now()
			}
			if w.woke.IsZero() || time.Since(w.woke) < burst {
				done = false
			}
		}
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(t0)
}

// sysmonTID is the Go runtime's sysmon thread of pid: the first thread the
// runtime starts (runtime.main starts sysmon before anything else), so the
// lowest thread id after the main thread's.
func sysmonTID(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var tids []int
	for _, e := range ents {
		if t, err := strconv.Atoi(e.Name()); err == nil && t != pid {
			tids = append(tids, t)
		}
	}
	if len(tids) == 0 {
		return 0, fmt.Errorf("pid %d: no thread besides the main one", pid)
	}
	return slices.Min(tids), nil
}

// threadSwitches is one thread's voluntary+nonvoluntary context switches.
func threadSwitches(pid, tid int) uint64 {
	kv := statusFields(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	return kv["voluntary_ctxt_switches"] + kv["nonvoluntary_ctxt_switches"]
}
