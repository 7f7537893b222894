package rpc

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerUnread is how many bytes c's socket send buffer holds that the peer
// has not read yet (getsockopt SO_NWRITE, unix(4)). 0 when it cannot be
// read (not a socket, closed).
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
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NWRITE); err == nil {
			n = v
		}
	})
	return int64(n)
}
