package rpc

import (
	"fmt"
	"net"
)

// peerInfo is who is on the other end of an accepted connection.
type peerInfo struct {
	Uid uint32
	Pid int // 0 when the platform cannot say
}

// peerCred reads the peer's credentials through the platform's socket
// option (peer_linux.go, peer_darwin.go).
func peerCred(nc net.Conn) (peerInfo, error) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return peerInfo{}, fmt.Errorf("not a unix socket: %T", nc)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peerInfo{}, err
	}
	var p peerInfo
	var serr error
	if err := raw.Control(func(fd uintptr) { p, serr = readPeer(int(fd)) }); err != nil {
		return peerInfo{}, err
	}
	return p, serr
}
