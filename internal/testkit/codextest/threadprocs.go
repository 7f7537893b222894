package codextest

import (
	"errors"

	"github.com/sessiond/sessiond/internal/proc"
)

// ThreadEnv is the variable codex 0.169 sets, to the thread's id, in the
// environment of every command it runs for that thread, and of the sandbox
// around a sandboxed one (CODEX_SESSION_ID carries the same id;
// CODEX_TOOL_CALL_ID the model's call id). codex's own processes do not
// carry it.
const ThreadEnv = "CODEX_THREAD_ID"

// ThreadCommands lists the pids of the live processes whose environment
// carries CODEX_THREAD_ID=threadID (proc.ScanEnv): the commands codex runs
// for that thread, their sandbox and whatever they started (the variable
// is inherited), sorted by pid. The host finds a closed session's
// leftover commands on a shared runtime the same way (proc.ScanEnv gives
// identities, safe to signal later).
func ThreadCommands(threadID string) ([]int, error) {
	if threadID == "" {
		return nil, errors.New("codextest: ThreadCommands: empty thread id")
	}
	ids, err := proc.ScanEnv(ThreadEnv + "=" + threadID)
	if err != nil {
		return nil, err
	}
	pids := make([]int, len(ids))
	for i, id := range ids {
		pids[i] = id.PID
	}
	return pids, nil
}
