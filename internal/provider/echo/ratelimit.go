package echo

import (
	"os"
	"time"
)

// RateLimitEnv makes every turn of the process end as codex ends one
// whose account hit its usage limit: "1" at once (nothing done), "item"
// after a command item ran. The /ratelimit directive does the former
// for one turn. The limit lifts an hour after the turn (resets_at in
// the error, as codex words it).
const RateLimitEnv = "SESSIOND_ECHO_RATELIMIT"

// UsageLimitMessage starts the error text of a rate-limited turn.
const UsageLimitMessage = "You've hit your usage limit."

// rateLimited plays a rate-limited turn when the directive or the
// environment asks for one, and reports whether it did.
func (s *server) rateLimited(th *thread, tu *activeTurn, text string, d directives, with func(kv ...any) map[string]any) bool {
	mode := os.Getenv(RateLimitEnv)
	if d.rateLimit {
		mode = "1"
	}
	if mode != "1" && mode != "item" {
		return false
	}
	if mode == "item" {
		cmd := map[string]any{"type": "commandExecution", "id": tu.id + "_cmd", "command": "echo ran", "cwd": th.cwd, "status": "inProgress"}
		s.w.notify("item/started", with("item", cmd, "startedAtMs", time.Now().UnixMilli()))
		cmd["status"], cmd["exitCode"], cmd["aggregatedOutput"] = "completed", 0, "ran\n"
		s.w.notify("item/completed", with("item", cmd, "completedAtMs", time.Now().UnixMilli()))
	}
	resets := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	msg := UsageLimitMessage + " resets_at=" + resets.Format(time.RFC3339)
	if err := s.store.appendTurn(th.id, turnRecord{TurnID: tu.id, Input: text, Status: "failed"}); err != nil {
		s.log.Warn("append turn", "thread_id", th.id, "err", err)
	}
	s.mu.Lock()
	if th.active == tu {
		th.active = nil
	}
	s.mu.Unlock()
	s.w.notify("turn/completed", map[string]any{
		"threadId": th.id,
		"turn": map[string]any{"id": tu.id, "status": "failed", "items": []any{},
			"error": map[string]any{"message": msg, "codexErrorInfo": "usageLimitExceeded", "resetsAt": resets.Unix()}},
	})
	return true
}
