package ctl

import (
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/tty"
)

var accountsFlags struct{ provider string }

var switchFlags struct{ now bool }

func init() {
	registerCtl(&ctlCommand{
		name: "accounts", usage: "[--provider NAME]", summary: "list the providers' accounts: limited until, sessions, runtimes",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&accountsFlags.provider, "provider", "", "only this provider's accounts")
		},
		run: ctlAccounts,
	})
	registerCtl(&ctlCommand{
		name: "switch", usage: "ID ACCOUNT [--now]", summary: "move a session to another account (queued behind a running turn)",
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&switchFlags.now, "now", false, "refuse (turn_running) instead of queueing behind a running turn")
		},
		run: ctlSwitch,
	})
}

func ctlAccounts(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("accounts", "takes no positional arguments")
	}
	var r api.ListAccountsResult
	if code := e.call("agentSession.listAccounts", api.ListAccountsParams{Provider: accountsFlags.provider}, &r); code != exitcode.OK {
		return code
	}
	return e.out(r, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "PROVIDER\tACCOUNT\tLIMITED UNTIL\tSESSIONS\tRUNTIMES")
		for _, a := range r.Accounts {
			until := "-"
			if a.LimitedUntil != nil {
				until = *a.LimitedUntil
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", tty.Safe(a.Provider), tty.Safe(a.Name), tty.Safe(until), a.Sessions, a.Runtimes)
		}
	})
}

func ctlSwitch(e *ctlEnv, args []string) int {
	if len(args) != 2 {
		return e.usageErr("switch", "needs a session id and an account")
	}
	p := api.SwitchAccountParams{SessionID: args[0], Account: args[1], When: api.SwitchWhenIdle}
	if switchFlags.now {
		p.When = api.SwitchWhenNow
	}
	var r api.SwitchAccountResult
	if code := e.call("agentSession.switchAccount", p, &r); code != exitcode.OK {
		return code
	}
	return e.out(r, func(tw *tabwriter.Writer) {
		switch {
		case r.Switched:
			fmt.Fprintf(tw, "switched to\t%s\n", tty.Safe(r.Account))
		case r.Queued:
			fmt.Fprintf(tw, "queued\tto %s, applied when the running turn ends\n", tty.Safe(r.Account))
		default:
			fmt.Fprintf(tw, "unchanged\tthe session runs on %s (a queued switch, if any, is cancelled)\n", tty.Safe(r.Account))
		}
	})
}
