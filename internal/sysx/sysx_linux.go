package sysx

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func tie(a *syscall.SysProcAttr, sig syscall.Signal) { a.Pdeathsig = sig }

// pipeFill: ioctl(FIONREAD), named TIOCINQ here (ioctl_tty(2)), and
// fcntl(F_GETPIPE_SZ) (fcntl(2)).
func pipeFill(fd int) (queued, size int, err error) {
	if queued, err = unix.IoctlGetInt(fd, unix.TIOCINQ); err != nil {
		return 0, 0, err
	}
	size, err = unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0)
	return queued, size, err
}
