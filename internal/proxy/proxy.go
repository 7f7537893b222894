package proxy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sessiond/sessiond/internal/autostart"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

// Run is `sessiond proxy [--socket PATH] [--state-dir DIR] [--config FILE]`
// on stdin and stdout; it returns the exit code (package comment).
func Run(args []string, stdin io.Reader, stdout io.WriteCloser, stderr io.Writer) int {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f autostart.Flags
	fs.StringVar(&f.Socket, "socket", "", "daemon socket")
	fs.StringVar(&f.StateDir, "state-dir", "", "state directory (for a daemon it starts)")
	fs.StringVar(&f.Config, "config", "", "config file (for a daemon it starts)")
	if err := fs.Parse(args); err != nil {
		return exitcode.Usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessiond proxy: unexpected argument %q\n", tty.Safe(fs.Arg(0)))
		return exitcode.Usage
	}
	f.Socket = rpc.SocketPath(f.Socket, os.Getenv)
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "sessiond proxy:", tty.Safe(err.Error()))
		return exitcode.NoDaemon
	}
	// A client gone from stdout is an EPIPE to handle, not a signal to die of.
	signal.Ignore(syscall.SIGPIPE)
	conn, err := autostart.Connect(context.Background(), f, bin)
	if err != nil {
		fmt.Fprintf(stderr, "sessiond proxy: %s\n", tty.Safe(err.Error()))
		return exitcode.NoDaemon
	}
	switch err := pipe(conn, stdin, stdout); {
	case err == nil:
		return exitcode.OK
	case errors.Is(err, ErrDaemonClosed):
		fmt.Fprintf(stderr, "sessiond proxy: %s (%s)\n", err, tty.Safe(f.Socket))
		return exitcode.Error
	default:
		fmt.Fprintln(stderr, "sessiond proxy:", tty.Safe(err.Error()))
		return exitcode.Error
	}
}
