package rpc

import "golang.org/x/sys/unix"

// readPeer: getsockopt(SOL_LOCAL, LOCAL_PEERCRED) for the uid and
// getsockopt(SOL_LOCAL, LOCAL_PEERPID) for the pid, unix(4). A pid that
// cannot be read is 0 (logged as such), never a refusal: the uid decides.
func readPeer(fd int) (peerInfo, error) {
	c, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return peerInfo{}, err
	}
	pid, _ := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	return peerInfo{Uid: c.Uid, Pid: pid}, nil
}
