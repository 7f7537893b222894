package ctl

import "golang.org/x/sys/unix"

// peerPID is the pid of the process at the other end of a connected
// AF_UNIX socket (SO_PEERCRED, unix(7)).
func peerPID(fd int) (int, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, err
	}
	return int(cred.Pid), nil
}
