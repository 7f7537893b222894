package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit parks the caller in the runtime's poller until p has exited
// (its pidfd turns readable), so a child's waiter holds no OS thread:
// os.Process.Wait blocks in waitid, one thread per child. A hundred
// parked threads make a live upgrade's exec slow (the kernel stops each
// one) and the new image start a hundred again before it accepts. Wait
// then returns at once. false: the pidfd cannot be polled, and Wait
// blocks as before.
func awaitExit(p *os.Process) bool {
	fd := -1
	if err := p.WithHandle(func(h uintptr) {
		fd, _ = unix.FcntlInt(h, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil || fd < 0 {
		return false
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd") // non-blocking: registered with the poller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	return rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		return err != nil || n > 0
	}) == nil
}
