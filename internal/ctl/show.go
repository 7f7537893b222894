package ctl

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

func init() {
	registerCtl(&ctlCommand{name: "show", usage: "ID", summary: "show one session", run: ctlShow})
}

func ctlShow(e *ctlEnv, args []string) int {
	if len(args) != 1 {
		return e.usageErr("show", "needs a session id")
	}
	c, code := e.dial(rpc.ClientOptions{})
	if c == nil {
		return code
	}
	defer c.Close()
	var s api.SessionInfo
	if err := c.Call(e.ctx, "agentSession.get", api.SessionParams{SessionID: args[0]}, &s); err != nil {
		return e.fail(err)
	}
	var u *treeUsage
	if s.PID != 0 && !e.json {
		var st rpc.Status
		if err := c.Call(e.ctx, "daemon.status", nil, &st); err != nil {
			return e.fail(err)
		}
		if tu, ok := sessionUsage(s, takeProcSnapshot(st.StateID)); ok {
			u = &tu
		}
	}
	return e.out(s, func(tw *tabwriter.Writer) { printSession(tw, s, u) })
}

// printSession prints a session's every field, whole (escaped); u is its
// process tree's figures when it is live.
func printSession(tw *tabwriter.Writer, s api.SessionInfo, u *treeUsage) {
	fmt.Fprintf(tw, "id\t%s\n", tty.Safe(s.SessionID))
	fmt.Fprintf(tw, "provider\t%s\n", tty.Safe(s.Provider))
	fmt.Fprintf(tw, "cwd\t%s\n", tty.Safe(s.Cwd))
	fmt.Fprintf(tw, "title\t%s\n", dash(tty.Safe(s.Title)))
	fmt.Fprintf(tw, "created\t%s\n", s.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "state\t%s\n", tty.Safe(s.State))
	fmt.Fprintf(tw, "lease\t%s (fence %d)\n", tty.Safe(s.Lease), s.Fence)
	fmt.Fprintf(tw, "holders\t%s\n", dash(holderList(s.Holders, ", ")))
	fmt.Fprintf(tw, "subscribers\t%d\n", s.Subscribers)
	fmt.Fprintf(tw, "pid\t%s\n", pidText(s.PID))
	if s.RuntimeID != "" { // a shared runtime: pid and the figures below are its, for all its sessions
		fmt.Fprintf(tw, "runtime\t%s (account %s, shared)\n", tty.Safe(s.RuntimeID), tty.Safe(s.Account))
	}
	if u != nil {
		fmt.Fprintf(tw, "processes\t%d (from %s)\n", u.Procs, u.Source)
		fmt.Fprintf(tw, "memory\t%s (from %s)\n", bytesText(u.Memory), u.Source)
		fmt.Fprintf(tw, "rss\t%s (summed over the processes)\n", bytesText(u.RSS))
	}
	if s.Cgroup != "" {
		fmt.Fprintf(tw, "cgroup\t%s\n", tty.Safe(s.Cgroup))
	}
	fmt.Fprintf(tw, "thread\t%s\n", dash(tty.Safe(s.ThreadID)))
	fmt.Fprintf(tw, "turn running\t%v\n", s.TurnRunning)
	if s.ReleaseAt != nil {
		fmt.Fprintf(tw, "release at\t%s\n", s.ReleaseAt.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "last seq\t%d\n", s.LastSeq)
	if x := s.LastExit; x != nil {
		code, sig := "-", "-"
		if x.Code != nil {
			code = fmt.Sprint(*x.Code)
		}
		if x.Signal != nil {
			sig = *x.Signal
		}
		fmt.Fprintf(tw, "last exit\troot %s, tree %s, code %s, signal %s, at %s\n", tty.Safe(x.Root), tty.Safe(x.Tree), code,
			tty.Safe(sig), x.At.Format(time.RFC3339))
	}
}
