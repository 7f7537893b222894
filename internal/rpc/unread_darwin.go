package rpc

import "golang.org/x/sys/unix"

// unreadBytes: getsockopt SO_NWRITE (unix(4)), what the socket's send
// buffer holds that the peer has not read.
func unreadBytes(fd int) (int, error) { return unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_NWRITE) }
