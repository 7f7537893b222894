package ctl

import (
	"fmt"
	"text/tabwriter"

	"github.com/sessiond/sessiond/internal/exitcode"
)

func init() {
	registerCtl(&ctlCommand{name: "shutdown", summary: "evict every live session and stop the daemon", run: ctlShutdown})
}

func ctlShutdown(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("shutdown", "takes no arguments")
	}
	var r struct{}
	if code := e.call("daemon.shutdown", nil, &r); code != exitcode.OK {
		return code
	}
	return e.out(r, func(tw *tabwriter.Writer) { fmt.Fprintln(tw, "daemon is shutting down") })
}
