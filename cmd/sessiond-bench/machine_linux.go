package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// cpuModel: the first "model name" of /proc/cpuinfo (proc(5)).
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// totalMemory: sysinfo(2).
func totalMemory() string {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f GiB", float64(si.Totalram)*float64(si.Unit)/(1<<30))
}

// loadAvg: /proc/loadavg (proc(5)).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], ",")
	}
	return "?"
}
