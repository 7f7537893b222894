package proc

import (
	"bufio"
	"strconv"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/process"
)

// benchIdentities builds n identities from the live process table: half
// alive, a quarter of absent pids, a quarter of live pids with another start
// time (reused).
func benchIdentities(b *testing.B, n int) []Identity {
	b.Helper()
	r, err := newStatReader()
	if err != nil {
		b.Fatal(err)
	}
	defer r.close()
	procs, err := r.snapshot(false)
	if err != nil || len(procs) == 0 {
		b.Fatal(err)
	}
	boot, _ := BootID()
	ids := make([]Identity, n)
	for i := range ids {
		p := procs[i%len(procs)]
		id := Identity{PID: p.pid, StartTicks: p.st.StartTicks, BootID: boot}
		switch i % 4 {
		case 2:
			id.PID = 4_000_000 + i // beyond any live pid here
		case 3:
			id.StartTicks++
		}
		ids[i] = id
	}
	return ids
}

// Steady state: the sweep a daemon repeats (live identities answered from
// their pidfds in one poll, gone ones remembered).
func BenchmarkProbeSweep1000(b *testing.B) {
	ids := benchIdentities(b, 1000)
	resetProbeCache()
	ProbeMany(ids)
	b.ReportAllocs()
	for b.Loop() {
		ProbeMany(ids)
	}
}

// First sight of every identity: the cache emptied before each sweep.
func BenchmarkProbeSweep1000Cold(b *testing.B) {
	ids := benchIdentities(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		resetProbeCache()
		ProbeMany(ids)
	}
}

func resetProbeCache() {
	cache.Lock()
	defer cache.Unlock()
	for id := range cache.live {
		cache.dropLocked(id)
	}
	clear(cache.gone)
}

// The same identities one by one through gopsutil: NewProcess + CreateTime,
// compared with the create time gopsutil gave for the live ones up front.
func BenchmarkGopsutilProbe1000(b *testing.B) {
	ids := benchIdentities(b, 1000)
	want := make([]int64, len(ids))
	for i, id := range ids {
		if p, err := process.NewProcess(int32(id.PID)); err == nil {
			want[i], _ = p.CreateTime()
			if i%4 == 3 {
				want[i]-- // the "reused" ones must not match
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		alive := 0
		for i, id := range ids {
			p, err := process.NewProcess(int32(id.PID))
			if err != nil {
				continue
			}
			if ct, err := p.CreateTime(); err == nil && ct == want[i] {
				alive++
			}
		}
	}
}

// One `ps -o lstart= -p PID` per identity (the per-session shell probe of
// the failure reports), spawned through Spawn so the test's subreaper
// leaves its status alone; ns/identity is the per-identity cost.
func BenchmarkPsSpawnProbe(b *testing.B) {
	ids := benchIdentities(b, 4)
	n := 0
	start := time.Now()
	for b.Loop() {
		for _, id := range ids {
			c, err := Spawn(Spec{Path: "/usr/bin/ps", Args: []string{"-o", "lstart=", "-p", strconv.Itoa(id.PID)}})
			if err != nil {
				b.Fatal(err)
			}
			c.Stdin().Close()
			bufio.NewReader(c.Stdout()).ReadString('\n')
			<-c.Exited()
			c.Stdout().Close()
			n++
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(n), "ns/identity")
}
