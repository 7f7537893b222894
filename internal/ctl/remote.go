package ctl

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/sysx"
	"github.com/sessiond/sessiond/internal/tty"
)

// `ctl --remote HOST` talks to the daemon of another machine through
// `ssh HOST sessiond proxy` (ssh from PATH, configured as the user's ssh
// is: ~/.ssh/config names hosts, keys and ports). ssh's stdin and stdout
// are one end of a socket pair; ctl speaks JSON-RPC on the other, so the
// rest of ctl (deadlines, probes) is the same as over the socket. ssh's
// stderr is ctl's.

// sshReap bounds the wait for ssh to exit after ctl closed its end (the
// remote proxy sees EOF and exits 0, then ssh does); past it ssh is killed.
const sshReap = 5 * time.Second

// remoteConn is the socket pair's end ctl uses; Close also reaps ssh.
type remoteConn struct {
	*net.UnixConn
	exited chan struct{} // closed when ssh's Wait returned
	err    error         // ssh's Wait error, set before exited closes
	cmd    *exec.Cmd
}

func (r *remoteConn) Close() error {
	err := r.UnixConn.Close()
	select {
	case <-r.exited:
	case <-time.After(sshReap):
		r.cmd.Process.Kill()
		<-r.exited
	}
	return err
}

// dialRemote starts `ssh HOST sessiond proxy` on a socket pair.
func dialRemote(host string, stderr io.Writer) (*remoteConn, error) {
	ours, theirs, err := sysx.SocketPair()
	if err != nil {
		return nil, err
	}
	defer theirs.Close()
	defer ours.Close() // net.FileConn dups it
	// "--" ends ssh's options: a HOST starting with "-" is a host, not a flag.
	cmd := exec.Command("ssh", "-T", "--", host, "sessiond", "proxy")
	cmd.Stdin, cmd.Stdout = theirs, theirs
	// Its own process group: Ctrl-C at the terminal reaches ctl (which
	// cancels the turn of `ctl send` over this very connection), not ssh.
	// ssh must then authenticate without prompting (keys, an agent).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = stderr
	nc, err := net.FileConn(ours)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	if err := cmd.Start(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("start ssh: %w", err)
	}
	r := &remoteConn{UnixConn: nc.(*net.UnixConn), exited: make(chan struct{}), cmd: cmd}
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()
	return r, nil
}

// remoteError is a remote connection that failed before its handshake
// was answered (ssh failed, or the remote proxy exited).
type remoteError struct {
	r   *remoteConn
	err error
}

func (re *remoteError) Error() string { return re.err.Error() }
func (re *remoteError) Unwrap() error { return re.err }

// remoteFailed is the exit code and message of a remoteError: the remote
// proxy's exit 3 (no daemon there) is ctl's, ssh's own failure (255) is an
// error.
func (e *ctlEnv) remoteFailed(re *remoteError) int {
	r := re.r
	r.Close()
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		switch ee.ExitCode() {
		case exitcode.NoDaemon:
			fmt.Fprintf(e.stderr, "sessiond ctl: no daemon can be reached on %s (sessiond proxy exited 3)\n", tty.Safe(e.remote))
			return exitcode.NoDaemon
		case 255:
			fmt.Fprintf(e.stderr, "sessiond ctl: ssh %s failed (exit 255)\n", tty.Safe(e.remote))
			return exitcode.Error
		case 127:
			fmt.Fprintf(e.stderr, "sessiond ctl: %s: sessiond is not on the remote PATH (exit 127)\n", tty.Safe(e.remote))
			return exitcode.Error
		}
	}
	return e.fail(re.err)
}
