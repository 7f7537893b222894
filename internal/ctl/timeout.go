package ctl

import (
	"context"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/internal/version"
	"net"
	"time"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

// A daemon that accepted the connection and then stopped answering
// (SIGSTOP, a debugger, a hang) must not hang ctl: the kernel completes the
// connect from the socket's backlog, so only an answer proves the daemon
// runs. The connect and handshake get dialTimeout. After that a call may
// take as long as it needs (a hold starting a provider, a turn streaming
// for an hour) as long as the daemon answers a daemon.status probe, sent
// every probeEvery. The probe goes first on the command's own connection
// (nothing new for the daemon to log); one unanswered there within
// probeEvery sits behind the command's own call, which a busy daemon may
// take long over (a large list reply while the machine is loaded), so it
// proves nothing: the probe is then made on a new connection (connect,
// initialize, daemon.status) within probeTimeout, and only a daemon that
// does not answer that ends the command with a stallError (exit 1). A
// slow call on a daemon that answers new connections keeps waiting.
const (
	dialTimeout  = 15 * time.Second
	probeEvery   = 5 * time.Second
	probeTimeout = 15 * time.Second
	// upgradeTimeout bounds `ctl upgrade`, which is not probed: the daemon
	// holds new calls while it quiesces and a probe caught by the exec
	// would never be answered.
	upgradeTimeout = 5 * time.Minute
)

// stallError is how a command ends when the daemon stopped answering.
type stallError struct {
	socket string
	what   string // what went unanswered
	after  time.Duration
}

func (s *stallError) Error() string {
	who := "the daemon on " + tty.Safe(s.socket)
	hint := "it is stopped (SIGSTOP, a debugger) or hung"
	if pid, state := socketOwner(s.socket); pid > 0 {
		who += fmt.Sprintf(" (pid %d%s)", pid, state)
		hint += fmt.Sprintf(": `kill -CONT %d` resumes a stopped one, `kill -QUIT %d` makes a hung one dump its goroutines to its log and exit", pid, pid)
	}
	return fmt.Sprintf("%s did not answer %s within %v: %s", who, s.what, s.after, hint)
}

// socketOwner is the pid of the process listening on socket (the peer
// credentials of a fresh connection: the kernel answers them even for a
// stopped process) and ", stopped" when gopsutil says it is; 0 when unknown.
func socketOwner(socket string) (int, string) {
	nc, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return 0, ""
	}
	defer nc.Close()
	raw, err := nc.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, ""
	}
	pid := 0
	raw.Control(func(fd uintptr) { pid, _ = peerPID(int(fd)) })
	if pid <= 0 {
		return 0, ""
	}
	if p, err := process.NewProcess(int32(pid)); err == nil {
		if st, err := p.Status(); err == nil && len(st) > 0 && st[0] == process.Stop {
			return pid, ", stopped"
		}
	}
	return pid, ""
}

// stalled is the stallError that ended the command's context, or nil.
func (e *ctlEnv) stalled() *stallError {
	var s *stallError
	if errors.As(context.Cause(e.ctx), &s) {
		return s
	}
	return nil
}

// dialTimed connects and runs the handshake within dialTimeout; a daemon
// that does not answer in time is a stallError.
func (e *ctlEnv) dialTimed(o rpc.ClientOptions) (*rpc.Client, error) {
	ctx, cancel := context.WithTimeoutCause(e.ctx, dialTimeout,
		&stallError{socket: e.socket, what: "the connection's handshake (initialize)", after: dialTimeout})
	defer cancel()
	c, err := e.dialConn(ctx, o)
	if err != nil {
		var s *stallError
		if errors.As(context.Cause(ctx), &s) && e.ctx.Err() == nil {
			return nil, s
		}
		return nil, err
	}
	return c, nil
}

// dialConn is rpc.Dial on the socket, or over ssh with --remote; a
// remote that fails before the handshake is answered reports why
// (remoteError).
func (e *ctlEnv) dialConn(ctx context.Context, o rpc.ClientOptions) (*rpc.Client, error) {
	if e.remote == "" {
		return rpc.Dial(ctx, e.socket, o)
	}
	r, err := dialRemote(e.remote, e.stderr)
	if err != nil {
		return nil, err
	}
	c, err := rpc.DialConn(ctx, r, o)
	if err != nil {
		return nil, &remoteError{r: r, err: err}
	}
	return c, nil
}

// watch probes the daemon until c closes or the command ends (see
// probeEvery); a daemon that answers neither on c nor on a new connection
// ends the command's context with a stallError and closes c (which also
// frees a write blocked on a daemon that stopped reading).
func (e *ctlEnv) watch(c *rpc.Client) {
	go func() {
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for {
			select {
			case <-c.Done():
				return
			case <-e.ctx.Done():
				return
			case <-tick.C:
			}
			if answers(e.ctx, probeEvery, func(ctx context.Context) { c.Call(ctx, "daemon.status", nil, nil) }) ||
				answers(e.ctx, probeTimeout, e.probeNew) {
				continue
			}
			select {
			case <-c.Done():
			case <-e.ctx.Done():
			default:
				e.cancel(&stallError{socket: e.socket, what: "a daemon.status probe on a new connection", after: probeTimeout})
				go c.Close()
			}
			return
		}
	}()
}

// answers runs probe with a context that ends after d (or with parent)
// and reports whether it returned before that: any answer, an error too,
// proves the daemon runs. It does not wait for a probe stuck past d (a
// write blocked on a daemon that stopped reading ignores ctx): the
// stall's close of the connection frees it.
func answers(parent context.Context, d time.Duration, probe func(context.Context)) bool {
	ctx, cancel := context.WithTimeout(parent, d)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		probe(ctx)
	}()
	select {
	case <-done:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// probeNew connects to the daemon afresh, initializes and asks
// daemon.status, all within ctx. A connect refused returns at once: the
// daemon is not hung but gone or going, which the command's own
// connection reports.
func (e *ctlEnv) probeNew(ctx context.Context) {
	c, err := e.dialConn(ctx, rpc.ClientOptions{Name: "sessiond-ctl-probe", Version: version.String(), Capabilities: []string{}})
	if err != nil {
		return
	}
	defer c.Close()
	c.Call(ctx, "daemon.status", nil, nil)
}
