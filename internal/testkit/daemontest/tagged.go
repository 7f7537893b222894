package daemontest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TaggedProcesses lists pids whose environment carries
// SESSIOND_STATE_ID=<stateID> (a state dir started by this package is
// accepted too). The daemon itself is not tagged; its children are.
func TaggedProcesses(stateID string) []int {
	if v, ok := stateIDs.Load(stateID); ok {
		stateID = v.(string)
	}
	tag := []byte("SESSIOND_STATE_ID=" + stateID + "\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*/environ")
	var pids []int
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(append(b, 0), tag) {
			continue
		}
		var pid int
		fmt.Sscanf(strings.TrimPrefix(p, "/proc/"), "%d/environ", &pid)
		if pid > 0 && !isZombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}
