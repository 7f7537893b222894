package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/sessiond/sessiond/internal/api"
)

func init() {
	registerCtl(&ctlCommand{name: "ls", summary: "list sessions", run: ctlLs})
}

func ctlLs(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("ls", "takes no arguments")
	}
	var r api.ListResult
	if code := e.call("agentSession.list", nil, &r); code != exitOK {
		return code
	}
	return e.out(r, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "ID\tPROVIDER\tSTATE\tLEASE\tFENCE\tPID\tHOLDERS\tLAST SEQ\tTITLE\tCWD")
		for _, s := range r.Sessions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", termSafe(s.SessionID), termSafe(s.Provider),
				termSafe(s.State), termSafe(s.Lease), s.Fence, pidText(s.PID), dash(holderList(s.Holders, ",")), s.LastSeq,
				dash(termSafe(s.Title)), termSafe(s.Cwd))
		}
	})
}

// holderList joins holder ids, each escaped, with sep.
func holderList(holders []string, sep string) string {
	out := make([]string, len(holders))
	for i, h := range holders {
		out[i] = termSafe(h)
	}
	return strings.Join(out, sep)
}

func pidText(pid int) string {
	if pid == 0 {
		return "-"
	}
	return fmt.Sprint(pid)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
