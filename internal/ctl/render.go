package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/tty"
)

// renderer prints a session's events as a person reads a turn: the
// assistant's text as it streams (whole when the provider sent no
// deltas), each command with its exit code, each file change, the plan,
// approvals with the `ctl respond` line that answers them, provider
// notices, the turn's token use at its end. All provider and client text
// is escaped.
type renderer struct {
	w        io.Writer
	session  string
	user     bool            // print the user's own text (attach)
	streamed map[string]bool // message items (or turns) whose text streamed
	midLine  bool            // the cursor is after streamed text
	usage    string          // the turn's last turn.usage, printed at its end
}

// outputTailLines is how much of a command's output a turn shows, each
// line cut at outputLineCells terminal cells.
const (
	outputTailLines = 3
	outputLineCells = 240
)

func newRenderer(w io.Writer, session string, user bool) *renderer {
	return &renderer{w: w, session: session, user: user, streamed: map[string]bool{}}
}

// line ends streamed text first, then prints one line.
func (r *renderer) line(format string, args ...any) {
	if r.midLine {
		fmt.Fprintln(r.w)
		r.midLine = false
	}
	fmt.Fprintf(r.w, format+"\n", args...)
}

func (r *renderer) event(ev event.Event) {
	var d map[string]any
	_ = json.Unmarshal(ev.Data, &d)
	str := func(k string) string { s, _ := d[k].(string); return s }
	switch ev.Type {
	case event.TurnStarted:
		if r.user {
			r.line("> %s", tty.Safe(str("text")))
		}
	case event.MessageDelta:
		r.streamed[msgKey(ev, str("itemId"))] = true
		fmt.Fprint(r.w, tty.Text(str("text")))
		r.midLine = true
	case event.MessageCompleted:
		if !r.streamed[msgKey(ev, str("itemId"))] {
			fmt.Fprint(r.w, tty.Text(str("text")))
			r.midLine = true
		}
		if r.midLine {
			fmt.Fprintln(r.w)
			r.midLine = false
		}
	case event.ItemStarted:
		if str("kind") == event.KindCommandExecution {
			// The command itself (codex titles it so; Claude's title is
			// the tool's name, "Bash").
			p, _ := d["payload"].(map[string]any)
			cmd, _ := p["command"].(string)
			if cmd == "" {
				cmd = str("title")
			}
			r.line("$ %s", tty.Safe(cmd))
		}
	case event.ItemCompleted:
		r.item(str("kind"), str("status"), d)
	case event.TurnPlan:
		steps, _ := d["steps"].([]any)
		var b strings.Builder
		for _, s := range steps {
			m, _ := s.(map[string]any)
			mark := map[any]string{"completed": "x", "inProgress": ">"}[m["status"]]
			if mark == "" {
				mark = " "
			}
			fmt.Fprintf(&b, " [%s] %s", mark, tty.Safe(fmt.Sprint(m["step"])))
		}
		r.line("plan:%s", b.String())
	case event.ApprovalRequested:
		r.approval(d)
	case event.ApprovalResolved:
		by := ""
		if str("by") != "" {
			by = " (by " + tty.Safe(str("by")) + ", " + tty.Safe(str("reason")) + ")"
		}
		r.line("  %s: %s%s", tty.Safe(str("requestId")), tty.Safe(str("decision")), by)
	case event.ProviderNotice:
		r.line("! %s", tty.Safe(str("message")))
	case event.TurnUsage:
		num := func(k string) int64 { f, _ := d[k].(float64); return int64(f) }
		r.usage = fmt.Sprintf("tokens: %d in (%d cached), %d out (%d reasoning), %d total",
			num("inputTokens"), num("cachedInputTokens"), num("outputTokens"), num("reasoningTokens"), num("totalTokens"))
		if c, ok := d["costUsd"].(float64); ok {
			r.usage += fmt.Sprintf(", $%.4f", c)
		}
	case event.TurnCompleted:
		if st := str("status"); st != event.StatusCompleted {
			r.line("turn %s %s", tty.Safe(st), tty.Safe(str("reason")))
		} else if r.midLine {
			r.line("")
			r.midLine = false
		}
		if r.usage != "" {
			r.line("%s", r.usage)
			r.usage = ""
		}
	}
}

// outputTail prints the last lines of a command's output, indented.
func (r *renderer) outputTail(out string) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if out == "" {
		return
	}
	if len(lines) > outputTailLines {
		r.line("  | … (%d more lines)", len(lines)-outputTailLines)
		lines = lines[len(lines)-outputTailLines:]
	}
	for _, l := range lines {
		r.line("  | %s", fit(l, outputLineCells))
	}
}

// item prints a finished command or file change.
func (r *renderer) item(kind, status string, d map[string]any) {
	p, _ := d["payload"].(map[string]any)
	switch kind {
	case event.KindCommandExecution:
		out, _ := p["output"].(string)
		r.outputTail(out)
		if status != event.ItemCompletedStatus {
			r.line("  %s", tty.Safe(status))
			return
		}
		if code, ok := p["exitCode"].(float64); ok {
			r.line("  exit %d", int64(code))
		} else {
			r.line("  %s (the provider reports no exit code)", tty.Safe(status))
		}
	case event.KindFileChange:
		changes, _ := p["changes"].([]any)
		for _, c := range changes {
			m, _ := c.(map[string]any)
			r.line("~ %s %s (%s)", tty.Safe(fmt.Sprint(m["kind"])), tty.Safe(fmt.Sprint(m["path"])), tty.Safe(status))
		}
	case event.KindMcpToolCall, event.KindToolCall, event.KindWebSearch, event.KindSubagent:
		r.line("* %s %s (%s)", kind, tty.Safe(fmt.Sprint(d["title"])), tty.Safe(status))
	}
}

func msgKey(ev event.Event, itemID string) string {
	if itemID != "" {
		return itemID
	}
	return "turn:" + ev.TurnID
}
