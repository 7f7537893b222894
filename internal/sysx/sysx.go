// Package sysx holds the few system facilities tests and benchmarks need
// that differ between Linux and macOS, one file per OS: tying a child's
// life to its parent's, and the bytes queued on a socket.
package sysx

import (
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
