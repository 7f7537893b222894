package ctl

import (
	"flag"
	"path/filepath"
	"text/tabwriter"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/exitcode"
)

var createFlags struct{ provider, cwd, title, account string }

func init() {
	registerCtl(&ctlCommand{
		name: "create", usage: "--provider NAME [--cwd DIR] [--title T] [--account A]", summary: "create a session (no child starts)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&createFlags.provider, "provider", "", "provider name from the daemon's config")
			fs.StringVar(&createFlags.cwd, "cwd", ".", "working directory (made absolute)")
			fs.StringVar(&createFlags.title, "title", "", "title")
			fs.StringVar(&createFlags.account, "account", "", "one of the provider's accounts (default: default)")
		},
		run: ctlCreate,
	})
}

func ctlCreate(e *ctlEnv, args []string) int {
	if len(args) != 0 {
		return e.usageErr("create", "takes no positional arguments")
	}
	if createFlags.provider == "" {
		return e.usageErr("create", "--provider is required")
	}
	cwd, err := filepath.Abs(createFlags.cwd)
	if err != nil {
		return e.usageErr("create", err.Error())
	}
	var s api.SessionInfo
	p := api.CreateParams{Provider: createFlags.provider, Cwd: cwd, Title: createFlags.title, Account: createFlags.account}
	if code := e.call("agentSession.create", p, &s); code != exitcode.OK {
		return code
	}
	return e.out(s, func(tw *tabwriter.Writer) { printSession(tw, s, nil) })
}
