package ctl

import (
	"fmt"
	"text/tabwriter"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
)

func init() {
	registerCtl(&ctlCommand{name: "delete", usage: "ID", summary: "delete a stored session and its journal", run: ctlDelete})
}

func ctlDelete(e *ctlEnv, args []string) int {
	if len(args) != 1 {
		return e.usageErr("delete", "needs a session id")
	}
	var r struct{}
	if code := e.call("agentSession.delete", api.SessionParams{SessionID: args[0]}, &r); code != exitcode.OK {
		return code
	}
	return e.out(r, func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "deleted %s\n", args[0]) })
}
