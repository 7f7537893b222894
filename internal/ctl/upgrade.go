package ctl

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/tty"
)

var upgradeFlags struct{ binary string }

func init() {
	registerCtl(&ctlCommand{
		name: "upgrade", usage: "[--binary PATH]",
		summary: "live upgrade: the daemon re-executes itself (same pid) from a new binary; children and turns carry on",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&upgradeFlags.binary, "binary", "", "absolute path of the new sessiond (default: the daemon's executable)")
		},
		run: ctlUpgrade, unwatched: true,
	})
}

// ctlUpgrade asks the daemon to hand over to --binary; the answer comes
// from the new image once it accepts again.
func ctlUpgrade(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("upgrade", "takes no arguments besides --binary PATH")
	}
	ctx, cancel := context.WithTimeoutCause(e.ctx, upgradeTimeout,
		&stallError{socket: e.socket, what: "daemon.upgrade", after: upgradeTimeout})
	defer cancel()
	e.ctx = ctx
	var r api.UpgradeResult
	if code := e.call("daemon.upgrade", api.UpgradeParams{Binary: upgradeFlags.binary}, &r); code != exitcode.OK {
		return code
	}
	return e.out(r, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "upgraded %s -> %s (pid %d, same process)\n", tty.Safe(r.FromVersion), tty.Safe(r.ToVersion), r.PID)
	})
}
