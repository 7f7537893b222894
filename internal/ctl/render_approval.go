package ctl

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/sessiond/sessiond/internal/tty"
)

// approval prints an approval request and the `ctl respond` lines that
// answer it: the choices for a command or a file change; for questions
// (a userInput request: codex's requestUserInput, Claude's
// AskUserQuestion) each question with its options, and a line carrying
// --answers with ANSWER to replace. Every value from the provider is
// escaped, and shell-quoted where it lands in a line meant to be pasted.
func (r *renderer) approval(d map[string]any) {
	str := func(k string) string { s, _ := d[k].(string); return s }
	opts := []string{"approve", "deny"}
	if o, ok := d["options"].([]any); ok && len(o) > 0 {
		opts = opts[:0]
		for _, x := range o {
			opts = append(opts, fmt.Sprint(x))
		}
	}
	det, _ := d["detail"].(map[string]any)
	in, _ := det["input"].(map[string]any) // Claude: the tool's input
	respond := fmt.Sprintf("%s respond %s %s", selfCtl(), shellWord(r.session), shellWord(str("requestId")))
	qs := questions(det, in)
	if len(qs) == 0 {
		r.line("? %s approval %s%s", tty.Safe(str("kind")), tty.Safe(str("requestId")), approvalSummary(det, in))
		r.line("  answer: %s %s", respond, tty.Safe(strings.Join(opts, "|")))
		return
	}
	r.line("? %s approval %s: %d question(s)", tty.Safe(str("kind")), tty.Safe(str("requestId")), len(qs))
	answers := map[string][]string{}
	for _, q := range qs {
		if q.key == q.text {
			r.line("  %s%s", tty.Safe(q.text), q.options())
		} else {
			r.line("  %s: %s%s", tty.Safe(q.key), tty.Safe(q.text), q.options())
		}
		answers[q.key] = []string{"ANSWER"}
	}
	b, _ := json.Marshal(answers)
	r.line("  answer: %s approve --answers %s", respond, shellWord(string(b)))
	var others []string
	for _, o := range opts {
		if o != "approve" && o != "approveForSession" {
			others = append(others, o)
		}
	}
	if len(others) > 0 {
		r.line("  refuse: %s %s", respond, tty.Safe(strings.Join(others, "|")))
	}
}

// approvalSummary is the command, path, reason or message a request is
// about, from its detail, (Claude) its tool's input or (ACP) its tool
// call's title.
func approvalSummary(det, in map[string]any) string {
	tc, _ := det["toolCall"].(map[string]any) // ACP: the tool call the permission is for
	for _, m := range []map[string]any{det, in, tc} {
		for _, k := range []string{"command", "file_path", "url", "reason", "message", "title"} {
			if s, ok := m[k].(string); ok && s != "" {
				return ": " + tty.Safe(s)
			}
		}
	}
	return ""
}

// question is one question of a userInput request.
type question struct {
	key  string // what --answers names it by: codex's id, else the text (Claude)
	text string
	opts []string
}

func (q question) options() string {
	if len(q.opts) == 0 {
		return ""
	}
	return " [" + tty.Safe(strings.Join(q.opts, "|")) + "]"
}

// questions reads detail.questions (codex) or input.questions (Claude).
func questions(det, in map[string]any) []question {
	raw, _ := det["questions"].([]any)
	if len(raw) == 0 {
		raw, _ = in["questions"].([]any)
	}
	var out []question
	for _, x := range raw {
		m, _ := x.(map[string]any)
		q := question{}
		q.text, _ = m["question"].(string)
		if id, _ := m["id"].(string); id != "" {
			q.key = id
		} else {
			q.key = q.text
		}
		os, _ := m["options"].([]any)
		for _, o := range os {
			om, _ := o.(map[string]any)
			if l, ok := om["label"].(string); ok {
				q.opts = append(q.opts, l)
			}
		}
		out = append(out, q)
	}
	return out
}

// plainWord is what a shell reads as one word as it is.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// shellWord is s as one shell word (single-quoted unless plain) with
// control characters escaped: a line a person pastes runs nothing a
// provider put in an id or a question.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return tty.Safe("'" + strings.ReplaceAll(s, "'", `'\''`) + "'")
}
