package proc

import (
	"fmt"

	"github.com/shirou/gopsutil/v4/process"
)

// Stats reports a process's resident memory (bytes) and CPU use (percent of
// one CPU since it started), for `ctl show`. It goes through gopsutil and is
// not meant for hot paths; probes use ProbeMany.
func Stats(pid int) (rss uint64, cpu float64, err error) {
	p, err := process.NewProcess(int32(pid))
	if err != nil {
		return 0, 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	mem, err := p.MemoryInfo()
	if err != nil {
		return 0, 0, fmt.Errorf("pid %d: memory: %w", pid, err)
	}
	cpu, err = p.CPUPercent()
	if err != nil {
		return 0, 0, fmt.Errorf("pid %d: cpu: %w", pid, err)
	}
	return mem.RSS, cpu, nil
}
