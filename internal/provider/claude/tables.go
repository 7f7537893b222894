package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sessiond/sessiond/internal/provider"
)

// Every message type of the Claude Agent SDK's message union (sdk.d.ts,
// SDKMessage; `system` by subtype) is in exactly one place: mapped (the
// switch in handleLine and onSystem), typeIgnored / systemIgnored (known,
// not journaled: the reason is next to it), or systemNotices / typeNotices
// (journaled as provider.notice). A test walks the union and fails on a
// type in none. Anything else is journaled once per type as a notice.

// typeMapped lists the top-level types handleLine maps.
var typeMapped = map[string]bool{
	"system": true, "stream_event": true, "assistant": true, "user": true, "result": true,
	"control_request": true, "control_response": true, "control_cancel_request": true,
	"rate_limit_event": true,
}

// systemMapped lists the system subtypes onSystem maps.
var systemMapped = map[string]bool{"init": true, "compact_boundary": true, "api_retry": true}

var typeIgnored = map[string]string{
	"keep_alive":        "a liveness ping of the stream",
	"tool_progress":     "elapsed-time ticks of a running tool; its result is journaled",
	"tool_use_summary":  "a one-line summary for the CLI's own UI; the items carry the tools",
	"auth_status":       "login progress of the CLI's UI; credentials are the account's own",
	"prompt_suggestion": "a suggested next prompt for the CLI's UI",
}

var typeNotices = map[string]string{
	"conversation_reset": "info",
}

var systemIgnored = map[string]string{
	"status":                   "requesting/compacting indicator; turn state comes from the messages",
	"control_request_progress": "progress of a control request the daemon sent",
	"hook_started":             "hooks are the user's own configuration",
	"hook_progress":            "hooks are the user's own configuration",
	"hook_response":            "hooks are the user's own configuration",
	"task_started":             "background task bookkeeping; the Task tool's items carry subagents",
	"task_updated":             "background task bookkeeping; the Task tool's items carry subagents",
	"task_progress":            "background task bookkeeping; the Task tool's items carry subagents",
	"task_notification":        "background task bookkeeping; the Task tool's items carry subagents",
	"background_tasks_changed": "background task bookkeeping of the CLI's UI",
	"thinking_tokens":          "a token count of streamed thinking; turn.usage carries the turn's",
	"session_state_changed":    "idle/running indicator; turn state comes from the messages",
	"commands_changed":         "slash commands of the CLI's UI",
	"files_persisted":          "file checkpointing of the CLI's UI",
	"memory_recall":            "memory lookups of the CLI's UI",
	"elicitation_complete":     "MCP elicitations are answered by the CLI's own UI",
	"local_command_output":     "output of a local slash command; the daemon sends none",
	"plugin_install":           "plugin management of the CLI's UI",
}

var systemNotices = map[string]string{
	"model_refusal_fallback":    "warning",
	"model_refusal_no_fallback": "warning",
	"notification":              "info",
	"permission_denied":         "info",
	"mirror_error":              "warning",
	"informational":             "info",
	"worker_shutting_down":      "info",
	"session_writes_lost":       "warning",
}

// readLoop reads stdout line by line until EOF, a read error or Drain.
func (a *Adapter) readLoop() {
	defer close(a.done)
	lr := provider.NewLineReader(a.out, a.o.MaxLineBytes)
	for {
		line, err := lr.Next()
		if errors.Is(err, provider.ErrLineTooLong) {
			// Dropped output is never silent: the journal says so too.
			a.anomaly("line_too_long", "max_bytes", a.o.MaxLineBytes)
			a.notice("warning", "line_too_long",
				fmt.Sprintf("the provider wrote a line over %d bytes; it was dropped", a.o.MaxLineBytes))
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && a.parkIfPaused(lr.Unparsed()) {
			continue // resumed: the deadline is cleared, the cut line goes on
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
				a.log.Warn("read provider stdout", "err", err)
			}
			return
		}
		a.handleLine(line)
	}
}

func (a *Adapter) handleLine(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m inbound
	if !a.decode("line", line, &m) || m.Type == "" {
		a.anomaly("unparseable_line", "line", capText(string(line), 120))
		return
	}
	switch m.Type {
	case "system":
		a.onSystem(&m, line)
	case "stream_event":
		a.onStreamEvent(&m, line)
	case "assistant":
		a.onAssistant(&m, line)
	case "user":
		a.onUser(&m)
	case "result":
		a.onResult(line)
	case "control_request":
		a.onControlRequest(&m)
	case "control_response":
		a.onControlResponse(&m)
	case "control_cancel_request":
		a.onControlCancel(&m)
	case "rate_limit_event":
		a.onRateLimitEvent(line)
	default:
		if _, ok := typeIgnored[m.Type]; ok {
			return
		}
		if lvl, ok := typeNotices[m.Type]; ok {
			a.notice(lvl, m.Type, noticeText(line))
			return
		}
		a.anomaly("unknown_message_type", "type", capText(m.Type, 60))
		a.noticeOnce("type:"+m.Type, "info", "unknown_message", "provider sent an unknown message type "+capText(m.Type, 100))
	}
}

// noticeText is a person's reading of a message: its message/text field,
// else the line itself, shortened.
func noticeText(line []byte) string {
	var n struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
		Message string `json:"message"`
		Text    string `json:"text"`
		Content string `json:"content"`
	}
	_ = json.Unmarshal(line, &n)
	for _, s := range []string{n.Message, n.Text, n.Content} {
		if s != "" {
			return s
		}
	}
	return capText(string(line), 300)
}
