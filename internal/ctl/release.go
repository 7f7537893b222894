package ctl

import (
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
)

var releaseFlags struct{ holder string }

func init() {
	registerCtl(&ctlCommand{
		name: "release", usage: "ID --holder H", summary: "release a holder's hold",
		flags: func(fs *flag.FlagSet) { fs.StringVar(&releaseFlags.holder, "holder", "", "holder id (required)") },
		run:   ctlRelease,
	})
}

func ctlRelease(e *ctlEnv, args []string) int {
	if len(args) != 1 {
		return e.usageErr("release", "needs a session id")
	}
	if releaseFlags.holder == "" {
		return e.usageErr("release", "--holder is required")
	}
	var r api.ReleaseResult
	if code := e.call("agentSession.release", api.ReleaseParams{SessionID: args[0], HolderID: releaseFlags.holder}, &r); code != exitcode.OK {
		return code
	}
	return e.out(r, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "released\t%v\n", r.Released)
		fmt.Fprintf(tw, "holders left\t%s\n", dash(holderList(r.Holders, ", ")))
		if r.ReleaseAt != nil {
			fmt.Fprintf(tw, "evicted at\t%s\n", r.ReleaseAt.Format(time.RFC3339))
		}
	})
}
