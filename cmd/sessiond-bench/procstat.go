package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clkTck is USER_HZ, 100 on every Linux this runs on.
const clkTck = 100

// usage is a process's cumulative counters from /proc.
type usage struct {
	cpuTicks uint64 // utime+stime, all threads including exited ones
	switches uint64 // voluntary+nonvoluntary context switches summed over live threads
	rssKiB   uint64 // VmRSS
	runNs    uint64 // on-CPU ns summed over live threads (/proc/<pid>/task/*/schedstat)
}

func readUsage(pid int) (usage, error) {
	var u usage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return u, fmt.Errorf("pid %d: bad stat", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	u.cpuTicks = ut + st
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		kv := statusFields(t)
		u.switches += kv["voluntary_ctxt_switches"] + kv["nonvoluntary_ctxt_switches"]
	}
	scheds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range scheds {
		if b, err := os.ReadFile(t); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				ns, _ := strconv.ParseUint(f[0], 10, 64)
				u.runNs += ns
			}
		}
	}
	u.rssKiB = statusFields(fmt.Sprintf("/proc/%d/status", pid))["VmRSS"]
	return u, nil
}

// statusFields parses the numeric fields of a /proc status file (kB units dropped).
func statusFields(path string) map[string]uint64 {
	out := map[string]uint64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		if n, err := strconv.ParseUint(fs[0], 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}
