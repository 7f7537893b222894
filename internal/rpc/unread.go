package rpc

import (
	"net"
	"syscall"
)

// peerUnread is how many bytes c's socket holds that the peer has not
// read yet (unreadBytes: per OS). 0 when it cannot be read (not a
// socket, closed).
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
		if v, err := unreadBytes(int(fd)); err == nil {
			n = v
		}
	})
	return int64(n)
}
