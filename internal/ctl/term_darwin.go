package main

import "golang.org/x/sys/unix"

// getTermios is the ioctl that reads a terminal's settings (TIOCGETA,
// tty(4)); it fails on anything but a terminal.
const getTermios = unix.TIOCGETA

// peerPID is the pid of the process at the other end of a connected
// AF_UNIX socket (LOCAL_PEERPID, unix(4)).
func peerPID(fd int) (int, error) {
	return unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
}
