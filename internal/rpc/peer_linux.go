package rpc

import "golang.org/x/sys/unix"

// readPeer: getsockopt(SO_PEERCRED), socket(7).
func readPeer(fd int) (peerInfo, error) {
	c, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return peerInfo{}, err
	}
	return peerInfo{Uid: c.Uid, Pid: int(c.Pid)}, nil
}
