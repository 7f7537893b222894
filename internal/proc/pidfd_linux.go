package proc

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// handle is an open reference to one verified process: a pidfd when the
// kernel has them, else just the identity (re-checked before each signal).
type handle struct {
	id Identity
	fd int // -1 without pidfd
}

var pidfdMissing struct {
	sync.Once
	missing bool
}

func havePidfd() bool {
	pidfdMissing.Do(func() {
		fd, err := unix.PidfdOpen(os.Getpid(), 0)
		if err != nil {
			pidfdMissing.missing = true
			return
		}
		unix.Close(fd)
	})
	return !pidfdMissing.missing
}

// pidfdHandle opens a pidfd on id.PID without checking who it is (the
// caller checks after); fd is -1 when that fails, absent when the pid does
// not exist.
func pidfdHandle(id Identity) (h handle, absent bool) {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		return handle{id: id, fd: -1}, errors.Is(err, unix.ESRCH)
	}
	return handle{id: id, fd: fd}, false
}

// openVerified opens a handle on id and checks, after opening, that the pid
// still is that process. Anything but Alive returns no handle.
func openVerified(r *statReader, id Identity) (handle, State) {
	fd := -1
	if havePidfd() {
		var err error
		fd, err = unix.PidfdOpen(id.PID, 0)
		if err != nil {
			if errors.Is(err, unix.ESRCH) {
				return handle{fd: -1}, PidAbsent
			}
			return handle{fd: -1}, Unverifiable
		}
	}
	st := probeOne(r, id)
	if st != Alive {
		if fd >= 0 {
			unix.Close(fd)
		}
		return handle{fd: -1}, st
	}
	return handle{id: id, fd: fd}, Alive
}

// signal sends sig to the handle's process. With a pidfd the target cannot
// be a reused pid; without, the identity is re-checked right before kill.
func (h handle) signal(r *statReader, sig syscall.Signal) error {
	if h.fd >= 0 {
		err := unix.PidfdSendSignal(h.fd, sig, nil, 0)
		if errors.Is(err, unix.ESRCH) {
			return errNoProc
		}
		return err
	}
	return killVerified(r, h.id, sig)
}

func (h handle) close() {
	if h.fd >= 0 {
		unix.Close(h.fd)
	}
}

// pollExited waits up to timeoutMs for any of the pidfds to become readable
// (its process exited) and reports which are.
func pollExited(hs []handle, timeoutMs int) ([]bool, error) {
	fds := make([]unix.PollFd, len(hs))
	for i, h := range hs {
		fds[i] = unix.PollFd{Fd: int32(h.fd), Events: unix.POLLIN}
	}
	for {
		_, err := unix.Poll(fds, timeoutMs)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	out := make([]bool, len(hs))
	for i := range fds {
		out[i] = fds[i].Revents != 0
	}
	return out, nil
}
