package rpc

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerUnread is how many bytes c's kernel send queue holds that the peer
// has not read yet (ioctl SIOCOUTQ; for a Unix socket, what sits in the
// peer's receive queue). 0 when it cannot be read (not a socket, closed).
func peerUnread(c net.Conn) int64 {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
			n = v
		}
	})
	return int64(n)
}
