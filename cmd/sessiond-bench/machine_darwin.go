package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// cpuModel: sysctl machdep.cpu.brand_string (sysctl(3)).
func cpuModel() string {
	if s, err := unix.Sysctl("machdep.cpu.brand_string"); err == nil {
		return s
	}
	return "unknown CPU"
}

// totalMemory: sysctl hw.memsize (sysctl(3)).
func totalMemory() string {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// loadAvg is not reported here.
func loadAvg() string { return "?" }
