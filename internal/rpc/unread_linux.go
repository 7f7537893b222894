package rpc

import "golang.org/x/sys/unix"

// unreadBytes: ioctl SIOCOUTQ, the kernel send queue; for a Unix socket,
// what sits in the peer's receive queue.
func unreadBytes(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.SIOCOUTQ) }
