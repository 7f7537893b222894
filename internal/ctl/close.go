package ctl

import (
	"fmt"
	"text/tabwriter"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/tty"
)

func init() {
	registerCtl(&ctlCommand{name: "close", usage: "ID", summary: "drop all holds and evict the session now", run: ctlClose})
}

func ctlClose(e *ctlEnv, args []string) int {
	if len(args) != 1 {
		return e.usageErr("close", "needs a session id")
	}
	var r api.CloseResult
	if code := e.call("agentSession.close", api.SessionParams{SessionID: args[0]}, &r); code != exitcode.OK {
		return code
	}
	return e.out(r, func(tw *tabwriter.Writer) {
		if len(r.Steps) == 0 {
			fmt.Fprintln(tw, "nothing to close (session is stored)")
			return
		}
		fmt.Fprintln(tw, "STEP\tOK\tMS")
		for _, s := range r.Steps {
			fmt.Fprintf(tw, "%s\t%v\t%d\n", tty.Safe(s.Name), s.OK, s.Ms)
		}
	})
}
