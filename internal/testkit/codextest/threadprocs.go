package codextest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ThreadEnv is the variable codex 0.169 sets, to the thread's id, in the
// environment of every command it runs for that thread (CODEX_SESSION_ID
// carries the same id; CODEX_TOOL_CALL_ID the model's call id). codex's
// own processes do not carry it.
const ThreadEnv = "CODEX_THREAD_ID"

// ErrNoProc is returned when the process table cannot be listed.
var ErrNoProc = errors.New("codextest: cannot list /proc")

// ThreadCommands lists the live processes whose environment carries
// CODEX_THREAD_ID=threadID: the commands codex runs for that thread and
// whatever they started (the variable is inherited), sorted by pid.
// Processes whose environ cannot be read (gone meanwhile, another user's)
// are skipped.
func ThreadCommands(threadID string) ([]int, error) {
	if threadID == "" {
		return nil, errors.New("codextest: ThreadCommands: empty thread id")
	}
	paths, err := filepath.Glob("/proc/[0-9]*/environ")
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("%w: %v", ErrNoProc, err)
	}
	want := []byte(ThreadEnv + "=" + threadID)
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(b, []byte{0}) {
			if bytes.Equal(kv, want) {
				pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "/proc/"), "/environ"))
				pids = append(pids, pid)
				break
			}
		}
	}
	sort.Ints(pids)
	return pids, nil
}
