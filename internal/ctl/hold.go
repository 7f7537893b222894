package ctl

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

var holdFlags struct {
	holder string
	noWait bool
}

func init() {
	registerCtl(&ctlCommand{
		name: "hold", usage: "ID [--holder H] [--no-wait]",
		summary: "hold a session (starts its provider) until Ctrl-C",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&holdFlags.holder, "holder", "", "holder id (default ctl-<pid>)")
			fs.BoolVar(&holdFlags.noWait, "no-wait", false, "print the hold and exit (the hold ends with this connection)")
		},
		run: ctlHold,
	})
}

func defaultHolder() string { return fmt.Sprintf("ctl-%d", os.Getpid()) }

func ctlHold(e *ctlEnv, args []string) int {
	if len(args) != 1 {
		return e.usageErr("hold", "needs a session id")
	}
	holder := holdFlags.holder
	if holder == "" {
		holder = defaultHolder()
	}
	c, code := e.dial(rpc.ClientOptions{})
	if c == nil {
		return code
	}
	defer c.Close()
	var r api.HoldResult
	if err := c.Call(e.ctx, "agentSession.hold", api.HoldParams{SessionID: args[0], HolderID: holder, Surface: "ctl"}, &r); err != nil {
		return e.fail(err)
	}
	e.out(r, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "session\t%s\n", tty.Safe(r.SessionID))
		fmt.Fprintf(tw, "state\t%s (fence %d)\n", tty.Safe(r.State), r.Fence)
		fmt.Fprintf(tw, "pid\t%d\n", r.PID)
		fmt.Fprintf(tw, "thread\t%s\n", tty.Safe(r.ThreadID))
		fmt.Fprintf(tw, "holders\t%s\n", holderList(r.Holders, ", "))
	})
	if holdFlags.noWait {
		return exitcode.OK
	}
	fmt.Fprintf(e.stderr, "holding %s as %s; Ctrl-C releases\n", tty.Safe(r.SessionID), tty.Safe(holder))
	select {
	case <-e.ctx.Done():
	case <-c.Done():
	}
	if s := e.stalled(); s != nil {
		return e.fail(s)
	}
	if e.ctx.Err() == nil {
		fmt.Fprintln(e.stderr, "sessiond ctl: the daemon closed the connection")
		return exitcode.Error
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rr api.ReleaseResult
	if err := c.Call(ctx, "agentSession.release", api.ReleaseParams{SessionID: r.SessionID, HolderID: holder, HoldToken: r.HoldToken}, &rr); err != nil {
		return e.fail(err)
	}
	return exitcode.OK
}
