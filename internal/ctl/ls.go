package ctl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

func init() {
	registerCtl(&ctlCommand{name: "ls", summary: "list sessions (provider, state, holders, turn, last activity)", run: ctlLs})
}

func ctlLs(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("ls", "takes no arguments")
	}
	c, code := e.dial(rpc.ClientOptions{})
	if c == nil {
		return code
	}
	defer c.Close()
	all, err := c.ListAll(e.ctx) // every page, oldest first
	if err != nil {
		return e.fail(err)
	}
	r := api.ListResult{Sessions: all}
	now := time.Now()
	return e.out(r, func(tw *tabwriter.Writer) { printLs(tw, r.Sessions, now) })
}

// Widths, in terminal cells, of the `ctl ls` and `ctl top` cells that
// carry client or provider text; longer values end in "…" (a path loses
// its start instead). `ctl show` and --json print them whole.
const (
	providerCells = 16
	holdersCells  = 32
	titleCells    = 40
	cwdCells      = 40
)

// printLs is the `ctl ls` table, oldest session first (the daemon's order).
// RUNTIME is the shared runtime a live session runs on ("-" for a
// process of its own, or none). Lease, fence and seq are in `ctl show`
// and --json.
func printLs(w io.Writer, sessions []api.SessionInfo, now time.Time) {
	var t table
	t.add("ID", "PROVIDER", "STATE", "HOLDERS", "TURN", "LAST ACTIVITY", "PID", "RUNTIME", "TITLE", "CWD")
	for _, s := range sessions {
		turn := "-"
		if s.TurnRunning {
			turn = "running"
		}
		t.add(tty.Safe(s.SessionID), fit(s.Provider, providerCells), fit(s.State, providerCells),
			dash(fit(strings.Join(s.Holders, ","), holdersCells)), turn, ago(now, s.LastActivityAt), pidText(s.PID),
			dash(tty.Safe(s.RuntimeID)), dash(fit(s.Title, titleCells)), fitTail(s.Cwd, cwdCells))
	}
	t.write(w)
}

// ago is a time as a person reads it in a table: "5s ago", "3m ago",
// "2h ago", "4d ago"; "-" when unknown.
func ago(now time.Time, t *time.Time) string {
	if t == nil {
		return "-"
	}
	d := now.Sub(*t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
	}
}

// holderList joins holder ids, each escaped, with sep.
func holderList(holders []string, sep string) string {
	out := make([]string, len(holders))
	for i, h := range holders {
		out[i] = tty.Safe(h)
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
