package main

import "golang.org/x/sys/unix"

// getTermios is the ioctl that reads a terminal's settings (TCGETS,
// ioctl_tty(2)); it fails on anything but a terminal.
const getTermios = unix.TCGETS

// peerPID is the pid of the process at the other end of a connected
// AF_UNIX socket (SO_PEERCRED, unix(7)).
func peerPID(fd int) (int, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, err
	}
	return int(cred.Pid), nil
}
