package ctl

import (
	"fmt"
	"text/tabwriter"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

func init() {
	registerCtl(&ctlCommand{name: "status", summary: "show the daemon's status", run: ctlStatus})
}

func ctlStatus(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("status", "takes no arguments")
	}
	var st rpc.Status
	if code := e.call("daemon.status", nil, &st); code != exitcode.OK {
		return code
	}
	return e.out(st, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "version\t%s (protocol %d)\n", tty.Safe(st.Version), st.ProtocolVersion)
		fmt.Fprintf(tw, "pid\t%d\n", st.PID)
		fmt.Fprintf(tw, "started\t%s\n", tty.Safe(st.StartedAt))
		fmt.Fprintf(tw, "socket\t%s\n", tty.Safe(st.Socket))
		fmt.Fprintf(tw, "state dir\t%s (id %s)\n", tty.Safe(st.StateDir), tty.Safe(st.StateID))
		fmt.Fprintf(tw, "sessions\t%d stored, %d live\n", st.Sessions.Stored, st.Sessions.Live)
		fmt.Fprintf(tw, "connections\t%d\n", st.Connections)
		fmt.Fprintf(tw, "providers\t%s\n", holderList(st.Providers, ", "))
		fmt.Fprintf(tw, "supervision\t%s\n", tty.Safe(doctorSupervision(st.Supervision).Detail))
		fmt.Fprintf(tw, "keep-awake\t%s\n", tty.Safe(doctorKeepAwake(st.Attention).Detail))
	})
}
