package ctl

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

var respondFlags struct {
	answers string
	content string
}

func init() {
	registerCtl(&ctlCommand{
		name: "respond", usage: "ID REQUEST approve|approveForSession|deny|cancel [--answers JSON] [--content JSON]",
		summary: "answer a pending approval",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&respondFlags.answers, "answers", "", `a userInput request's answers, e.g. {"q1":["yes"]}`)
			fs.StringVar(&respondFlags.content, "content", "", "an elicitation's content (a JSON object)")
		},
		run: ctlRespond,
	})
}

func ctlRespond(e *ctlEnv, args []string) int {
	if len(args) != 3 {
		return e.usageErr("respond", "needs a session id, a request id and a decision")
	}
	p := api.RespondParams{SessionID: args[0], RequestID: args[1], Decision: args[2]}
	if respondFlags.answers != "" {
		if err := json.Unmarshal([]byte(respondFlags.answers), &p.Answers); err != nil {
			return e.usageErr("respond", fmt.Sprintf("--answers: not a JSON object of string arrays: %v", err))
		}
	}
	if respondFlags.content != "" {
		if !json.Valid([]byte(respondFlags.content)) {
			return e.usageErr("respond", "--content: not JSON")
		}
		p.Content = json.RawMessage(respondFlags.content)
	}
	c, code := e.dial(rpc.ClientOptions{})
	if c == nil {
		return code
	}
	defer c.Close()
	if err := c.Call(e.ctx, "agentSession.respond", p, nil); err != nil {
		return e.fail(err)
	}
	if e.json {
		fmt.Fprintln(e.stdout, "{}")
	} else {
		fmt.Fprintf(e.stdout, "%s: %s\n", tty.Safe(p.RequestID), tty.Safe(p.Decision))
	}
	return exitcode.OK
}
