package ctl

import "golang.org/x/sys/unix"

// peerPID is the pid of the process at the other end of a connected
// AF_UNIX socket (LOCAL_PEERPID, unix(4)).
func peerPID(fd int) (int, error) {
	return unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
}
