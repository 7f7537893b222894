package ctl

import (
	"context"
	"errors"
	"fmt"
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
// every probeEvery on the same connection, within probeTimeout; the first
// probe that goes unanswered ends the command with a stallError (exit 1).
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

// watch probes the daemon on c until c closes or the command ends; an
// unanswered probe ends the command's context with a stallError and closes
// c (which also frees a write blocked on a daemon that stopped reading).
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
			answered := make(chan struct{})
			go func() {
				defer close(answered)
				ctx, cancel := context.WithTimeout(context.Background(), probeTimeout+time.Second)
				defer cancel()
				c.Call(ctx, "daemon.status", nil, nil) // any answer, an error too, proves it runs
			}()
			timer := time.NewTimer(probeTimeout)
			select {
			case <-answered:
				timer.Stop()
				continue
			case <-c.Done():
			case <-e.ctx.Done():
			case <-timer.C:
				e.cancel(&stallError{socket: e.socket, what: "a daemon.status probe", after: probeTimeout})
				go c.Close()
			}
			timer.Stop()
			return
		}
	}()
}
