package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
	"github.com/sessiond/sessiond/internal/version"
)

// ctlCommand is one `sessiond ctl` subcommand; each lives in its own
// <name>.go and registers itself in init (doctor is added that way).
type ctlCommand struct {
	name    string
	usage   string // arguments, after the name
	summary string
	// flags declares the subcommand's own flags on fs; run gets the
	// positional arguments.
	flags func(fs *flag.FlagSet)
	run   func(e *ctlEnv, args []string) int
	// unwatched: no daemon.status probes on its connection (upgrade,
	// which bounds itself instead; see timeout.go).
	unwatched bool
}

var ctlCommands = map[string]*ctlCommand{}

// registerCtl adds a subcommand; a duplicate is a programming error.
func registerCtl(c *ctlCommand) {
	if _, dup := ctlCommands[c.name]; dup {
		panic("ctl: subcommand registered twice: " + c.name)
	}
	ctlCommands[c.name] = c
}

// ctlEnv is what every subcommand gets.
type ctlEnv struct {
	ctx            context.Context
	cancel         context.CancelCauseFunc // ends ctx with a cause (a stallError)
	socket         string                  // the daemon's socket, or "ssh HOST" with remote
	remote         string                  // --remote HOST: over `ssh HOST sessiond proxy`
	watchdog       bool                    // probe every connection dial makes
	json           bool
	stdout, stderr io.Writer
}

func ctlUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: sessiond ctl [--socket PATH | --remote HOST] [--json] SUBCOMMAND [ARGS]")
	fmt.Fprintln(w, "  --remote HOST: the daemon on HOST, through `ssh HOST sessiond proxy` (ssh from PATH)")
	names := make([]string, 0, len(ctlCommands))
	for n := range ctlCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range names {
		c := ctlCommands[n]
		fmt.Fprintf(tw, "  %s %s\t%s\n", n, c.usage, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "exit codes: 0 ok, 1 error from the daemon, 2 usage, 3 no daemon running")
}

// Run is `sessiond ctl`: it parses the global flags, runs the subcommand
// against the daemon and returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	e := &ctlEnv{stdout: stdout, stderr: stderr}
	global := flag.NewFlagSet("ctl", flag.ContinueOnError)
	global.SetOutput(stderr)
	socketFlag := global.String("socket", "", "daemon socket")
	global.StringVar(&e.remote, "remote", "", "the daemon on HOST, over `ssh HOST sessiond proxy`")
	global.BoolVar(&e.json, "json", false, "print JSON")
	global.Usage = func() { ctlUsage(stderr) }
	if err := global.Parse(args); err != nil {
		return exitcode.Usage
	}
	if global.NArg() == 0 {
		ctlUsage(stderr)
		return exitcode.Usage
	}
	name := global.Arg(0)
	if name == "help" {
		ctlUsage(stdout)
		return exitcode.OK
	}
	c, ok := ctlCommands[name]
	if !ok {
		fmt.Fprintf(stderr, "sessiond ctl: unknown subcommand %q\n", name)
		ctlUsage(stderr)
		return exitcode.Usage
	}
	fs := flag.NewFlagSet("ctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(socketFlag, "socket", *socketFlag, "daemon socket")
	fs.StringVar(&e.remote, "remote", e.remote, "the daemon on HOST, over `ssh HOST sessiond proxy`")
	fs.BoolVar(&e.json, "json", e.json, "print JSON")
	if c.flags != nil {
		c.flags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sessiond ctl %s %s\n", name, c.usage)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, global.Args()[1:])
	if err != nil {
		return exitcode.Usage
	}
	e.socket = rpc.SocketPath(*socketFlag, os.Getenv)
	if e.remote != "" {
		if *socketFlag != "" {
			fmt.Fprintln(stderr, "sessiond ctl: --remote and --socket exclude each other (the remote proxy finds its daemon's socket)")
			return exitcode.Usage
		}
		if name == "doctor" {
			fmt.Fprintf(stderr, "sessiond ctl doctor: it checks this machine; run it there: ssh %s sessiond ctl doctor\n", tty.Safe(e.remote))
			return exitcode.Usage
		}
		e.socket = "ssh " + e.remote
	} else if *socketFlag != "" {
		hintSocket = " --socket " + shellWord(*socketFlag)
	}
	sigCtx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	e.ctx, e.cancel = context.WithCancelCause(sigCtx)
	defer e.cancel(nil)
	e.watchdog = !c.unwatched
	return c.run(e, pos)
}

// parseInterspersed parses flags that may come after positional arguments
// (`hold ID --holder H`).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// usageErr prints a usage message for the subcommand.
func (e *ctlEnv) usageErr(name, msg string) int {
	fmt.Fprintf(e.stderr, "sessiond ctl %s: %s\nusage: sessiond ctl %s %s\n", name, msg, name, ctlCommands[name].usage)
	return exitcode.Usage
}

// dial connects with every capability; a missing daemon is exit 3, one
// that does not answer exit 1 (timeout.go). The connection is probed
// while the command runs.
func (e *ctlEnv) dial(o rpc.ClientOptions) (*rpc.Client, int) {
	o.Name = "sessiond-ctl"
	o.Version = version.String()
	c, err := e.dialTimed(o)
	if err == nil {
		if e.watchdog {
			e.watch(c)
		}
		return c, exitcode.OK
	}
	if re := (*remoteError)(nil); errors.As(err, &re) && e.stalled() == nil {
		return nil, e.remoteFailed(re)
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		fmt.Fprintf(e.stderr, "sessiond ctl: no daemon is running on %s\n"+
			"start one with `%s` (or `make run` in a sessiond checkout)\n", tty.Safe(e.socket), selfServe())
		return nil, exitcode.NoDaemon
	}
	return nil, e.fail(err)
}

// call dials, calls one method and closes.
func (e *ctlEnv) call(method string, params, result any) int {
	c, code := e.dial(rpc.ClientOptions{})
	if c == nil {
		return code
	}
	defer c.Close()
	if err := c.Call(e.ctx, method, params, result); err != nil {
		return e.fail(err)
	}
	return exitcode.OK
}

// fail prints an error; a daemon error names its reason and data, a
// daemon that stopped answering says so (whatever error that caused).
func (e *ctlEnv) fail(err error) int {
	if s := e.stalled(); s != nil {
		err = s
	}
	var re *rpc.Error
	if errors.As(err, &re) {
		var extra []string
		for k, v := range re.Data {
			if k != "reason" {
				extra = append(extra, tty.Safe(fmt.Sprintf("%s=%v", k, v)))
			}
		}
		sort.Strings(extra)
		fmt.Fprintf(e.stderr, "sessiond ctl: %s [%s]", tty.Safe(re.Message), tty.Safe(re.Reason))
		if len(extra) > 0 {
			fmt.Fprintf(e.stderr, " %s", strings.Join(extra, " "))
		}
		fmt.Fprintln(e.stderr)
		return exitcode.Error
	}
	fmt.Fprintln(e.stderr, "sessiond ctl:", tty.Safe(err.Error()))
	return exitcode.Error
}

// out prints v as JSON with --json, else calls text with an aligned table.
func (e *ctlEnv) out(v any, text func(tw *tabwriter.Writer)) int {
	if e.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return e.fail(err)
		}
		return exitcode.OK
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	text(tw)
	tw.Flush()
	return exitcode.OK
}
