package proc

import (
	"sync"
	"time"
)

// Without a subreaper (macOS; Linux when PR_SET_CHILD_SUBREAPER is
// refused) a descendant whose parent exits is reparented to init (launchd)
// and is nobody's descendant in a later scan. RecordDescendants makes the
// package remember, while children run, the descendants seen under each:
// one sampler for all children (a process-table pass every interval while
// at least one child runs; no per-child ticker, none at all without
// children), and the close ladder counts what was recorded among the
// tree's known members (identity-checked, so a reused pid never matches).

// maxRecorded bounds what one child's record holds.
const maxRecorded = 4096

var recorder = struct {
	sync.Mutex
	every   time.Duration // 0: off
	stop    chan struct{}
	wake    chan struct{}
	done    chan struct{}
	running map[*Child]struct{} // every child not yet waited for, recording on or off
}{running: map[*Child]struct{}{}}

// RecordDescendants turns recording on with one sampling pass every
// interval; stop turns it off and waits for the sampler to end.
func RecordDescendants(every time.Duration) (stop func()) {
	recorder.Lock()
	defer recorder.Unlock()
	if recorder.every > 0 {
		return func() {}
	}
	recorder.every = every
	recorder.stop, recorder.wake, recorder.done = make(chan struct{}), make(chan struct{}, 1), make(chan struct{})
	go sample(every, recorder.stop, recorder.wake, recorder.done)
	return func() {
		recorder.Lock()
		st, done := recorder.stop, recorder.done
		recorder.every = 0
		recorder.Unlock()
		close(st)
		<-done
	}
}

// record registers a running child with the sampler (on or not yet).
func (c *Child) record(on bool) {
	recorder.Lock()
	defer recorder.Unlock()
	if !on {
		delete(recorder.running, c)
		return
	}
	recorder.running[c] = struct{}{}
	select {
	case recorder.wake <- struct{}{}:
	default:
	}
}

// Recorded is what the sampler saw under c while it ran.
func (c *Child) Recorded() []Identity {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	out := make([]Identity, 0, len(c.rec))
	for _, id := range c.rec {
		out = append(out, id)
	}
	return out
}

// sample runs one pass every interval while children run; with none it
// sleeps until one is registered.
func sample(every time.Duration, stop, wake <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		recorder.Lock()
		n := len(recorder.running)
		recorder.Unlock()
		if n == 0 {
			select {
			case <-wake:
			case <-stop:
				return
			}
		}
		t.Reset(every)
		select {
		case <-t.C:
		case <-stop:
			return
		}
		samplePass()
	}
}

// samplePass reads the process table once and adds each running child's
// live descendants to its record.
func samplePass() {
	recorder.Lock()
	kids := make([]*Child, 0, len(recorder.running))
	for c := range recorder.running {
		kids = append(kids, c)
	}
	recorder.Unlock()
	if len(kids) == 0 {
		return
	}
	r, err := newStatReader()
	if err != nil {
		return
	}
	defer r.close()
	procs, err := r.snapshot(false)
	if err != nil {
		return
	}
	boot, _ := BootID()
	children := map[int][]procEntry{}
	for _, p := range procs {
		children[p.st.PPID] = append(children[p.st.PPID], p)
	}
	for _, c := range kids {
		c.addRecorded(descendants(children, c.id.PID), boot)
	}
}

// descendants lists the entries under pid (not pid itself).
func descendants(children map[int][]procEntry, pid int) []procEntry {
	var out []procEntry
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, e := range children[p] {
			out = append(out, e)
			queue = append(queue, e.pid)
		}
	}
	return out
}

func (c *Child) addRecorded(ps []procEntry, boot string) {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	if c.rec == nil {
		c.rec = map[int]Identity{}
	}
	for _, p := range ps {
		if len(c.rec) >= maxRecorded {
			return
		}
		c.rec[p.pid] = Identity{PID: p.pid, StartTicks: p.st.StartTicks, BootID: boot}
	}
}
