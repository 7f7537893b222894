package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/sessiond/sessiond/internal/proc"
)

// benchProbe: proc.ProbeMany over n identities in this process (first
// sweep cold, then repeats), against gopsutil one by one (NewProcess +
// CreateTime) and a `ps -o lstart= -p PID` spawn per identity. The
// identities follow internal/proc's benchmark: half alive, a quarter absent
// pids, a quarter live pids with another start time.
func benchProbe(_ context.Context, b *bench) ([]figure, error) {
	ids, err := identities(b.sz.probeN)
	if err != nil {
		return nil, err
	}
	n := float64(len(ids))
	t := time.Now()
	proc.ProbeMany(ids)
	cold := time.Since(t)
	// A/B: one ProbeMany sweep, then one gopsutil sweep, repeated.
	var sweeps, gops []time.Duration
	rounds := 20
	if b.sz.probeN < 1000 {
		rounds = 5
	}
	for r := 0; r < rounds; r++ {
		t := time.Now()
		proc.ProbeMany(ids)
		sweeps = append(sweeps, time.Since(t))
		t = time.Now()
		gopsutilSweep(ids)
		gops = append(gops, time.Since(t))
	}
	var psTotal time.Duration
	for i := 0; i < b.sz.psN; i++ {
		t := time.Now()
		exec.Command("ps", "-o", "lstart=", "-p", strconv.Itoa(ids[i%len(ids)].PID)).Output()
		psTotal += time.Since(t)
	}
	rep := pct(sweeps, 50)
	perID := float64(rep.Nanoseconds()) / n
	psPerID := float64(psTotal.Nanoseconds()) / float64(b.sz.psN)
	name := fmt.Sprintf("probe.sweep%d", len(ids))
	f := atMost(name+"_repeat", ms(rep), "ms", 2)
	f.Baseline = ms(pct(gops, 50))
	return []figure{
		atMost(name+"_cold", ms(cold), "ms", 2),
		f,
		ratioAtMost("probe.per_identity_vs_ps_spawn", perID, psPerID, "ns", 0.001),
	}, nil
}

func gopsutilSweep(ids []proc.Identity) int {
	alive := 0
	for _, id := range ids {
		p, err := process.NewProcess(int32(id.PID))
		if err != nil {
			continue
		}
		if _, err := p.CreateTime(); err == nil {
			alive++
		}
	}
	return alive
}

// identities builds n identities from the live process table.
func identities(n int) ([]proc.Identity, error) {
	boot, err := proc.BootID()
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var live []proc.Identity
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		st, err := strconv.ParseUint(f[19], 10, 64) // field 22
		if err != nil {
			continue
		}
		live = append(live, proc.Identity{PID: pid, StartTicks: st, BootID: boot})
	}
	if len(live) == 0 {
		return nil, fmt.Errorf("no processes in /proc")
	}
	ids := make([]proc.Identity, n)
	for i := range ids {
		id := live[i%len(live)]
		switch i % 4 {
		case 2:
			id.PID = 4_000_000 + i // beyond any live pid here
		case 3:
			id.StartTicks++
		}
		ids[i] = id
	}
	return ids, nil
}
