package host

import (
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/proc"
)

// limitMessages are provider.notice's message per limit code.
var limitMessages = map[string]string{
	proc.LimitMemory: "the provider's cgroup hit its memory limit: the kernel OOM-killed a process",
	proc.LimitPids:   "the provider's cgroup hit its pids limit: a fork was refused",
}

// onLimit is a child's OnLimit (called from the cgroup watcher): it
// journals provider.notice {code} on the child's sink and remembers the
// code for the provider.exited of a child that then dies. sink is the
// child's, captured at spawn, so a later child's journal is never written.
func (h *Host) onLimit(e *entry, sink *journal.Sink) func(code string) {
	return func(code string) {
		h.mu.Lock()
		e.limitHit = code
		h.mu.Unlock()
		h.log.Warn("provider hit a cgroup limit", "session_id", e.id, "code", code)
		sink.Append(event.New(event.ProviderNotice, "", event.NoticeData{
			Level: "warning", Message: limitMessages[code], Code: code}))
	}
}
