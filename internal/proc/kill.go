package proc

import (
	"errors"
	"syscall"
)

// killVerified sends sig to id's pid with kill(2) after checking, right
// before, that the pid still is that process: for platforms and kernels
// without a signal through a handle.
func killVerified(r *statReader, id Identity, sig syscall.Signal) error {
	if probeOne(r, id) != Alive {
		return errNoProc
	}
	err := syscall.Kill(id.PID, sig)
	if errors.Is(err, syscall.ESRCH) {
		return errNoProc
	}
	return err
}
