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

// ThreadCommands lists the pids of the live processes inside scope (the
// env tags of the codex process's tree: a runtime's or a session's, under
// a state id) whose environment carries CODEX_THREAD_ID=threadID: the
// commands codex runs for that thread, their sandbox and whatever they
// started (both are inherited), sorted by pid. It is proc.Marked, the
// scan the host runs to find a closed session's leftover commands on a
// shared runtime.
func ThreadCommands(scope proc.Tags, threadID string) ([]int, error) {
	if threadID == "" {
		return nil, errors.New("codextest: ThreadCommands: empty thread id")
	}
	ids, err := proc.Marked(scope, ThreadEnv, threadID)
	if err != nil {
		return nil, err
	}
	pids := make([]int, len(ids))
	for i, id := range ids {
		pids[i] = id.PID
	}
	return pids, nil
}
