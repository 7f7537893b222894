// Package sysx holds the few system facilities tests and benchmarks need
// that differ between Linux and macOS, one file per OS: tying a child's
// life to its parent's, and the bytes queued on a socket; and a
// close-on-exec socket pair (macOS has no SOCK_CLOEXEC).
package sysx

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Tie arranges for cmd's process to get sig when the thread that started
// it exits (Linux: PR_SET_PDEATHSIG, prctl(2)); elsewhere it does nothing
// and a child may outlive a killed parent. Other SysProcAttr fields are
// kept.
func Tie(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	tie(cmd.SysProcAttr, sig)
}

// PipeFill reports how many bytes wait unread in the pipe fd and the
// pipe's capacity: a writer blocks once queued reaches size.
func PipeFill(fd int) (queued, size int, err error) { return pipeFill(fd) }

// SocketPair is a connected pair of Unix stream sockets, both
// close-on-exec (made under syscall.ForkLock, so no child started
// meanwhile inherits them): one end for a child's stdin and stdout, the
// other for net.FileConn (ctl --remote, the proxy benchmark).
func SocketPair() (a, b *os.File, err error) {
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "socketpair-a"), os.NewFile(uintptr(fds[1]), "socketpair-b"), nil
}
