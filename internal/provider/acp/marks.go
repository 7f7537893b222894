package acp

import "github.com/sessiond/sessiond/internal/provider"

// commandMarks names the agents (by the agentInfo.name their initialize
// answers) known to mark every command process they run for a session
// with an environment entry holding its sessionId, and that entry:
// measured, codex-acp 0.16.0 runs codex inside, which sets
// CODEX_THREAD_ID to the ACP sessionId on each command it runs. A shared
// runtime's session teardown kills what is left of a closed session's
// commands by it (provider.CommandMarker); other agents mark nothing
// measured, so theirs stop only through session/cancel or with the
// runtime.
var commandMarks = map[string]string{"codex-acp": "CODEX_THREAD_ID"}

// markedThread is a thread of an agent that marks its commands.
type markedThread struct {
	*Adapter
	env string
}

// CommandEnv is the agent's mark (provider.CommandMarker).
func (m *markedThread) CommandEnv() string { return m.env }

var _ provider.CommandMarker = (*markedThread)(nil)

// thread is a as the host gets it: marked when its agent marks commands.
func (r *Runtime) thread(a *Adapter) provider.Thread {
	r.mu.Lock()
	env := commandMarks[r.agent]
	r.mu.Unlock()
	if env == "" {
		return a
	}
	return &markedThread{Adapter: a, env: env}
}

// adapterOf is the adapter behind a thread of a runtime (nil: none).
func adapterOf(t provider.Thread) *Adapter {
	switch v := t.(type) {
	case *Adapter:
		return v
	case *markedThread:
		return v.Adapter
	}
	return nil
}
