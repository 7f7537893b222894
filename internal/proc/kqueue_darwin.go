package proc

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// handle is an open reference to one verified process: a kqueue holding an
// EVFILT_PROC NOTE_EXIT registration on its pid. Registered while the
// process is alive (checked after registering), it can only ever report
// that process's exit, like a pidfd on Linux.
type handle struct {
	id Identity
	fd int // the kqueue; -1 without
}

func havePidfd() bool { return true }

// pidfdHandle: kqueue(2) and kevent(2) with EVFILT_PROC, NOTE_EXIT on
// id.PID; absent when the pid does not exist (ESRCH).
func pidfdHandle(id Identity) (handle, bool) {
	kq, err := unix.Kqueue()
	if err != nil {
		return handle{id: id, fd: -1}, false
	}
	unix.CloseOnExec(kq)
	ev := []unix.Kevent_t{{Ident: uint64(id.PID), Filter: unix.EVFILT_PROC, Flags: unix.EV_ADD, Fflags: unix.NOTE_EXIT}}
	if _, err := unix.Kevent(kq, ev, nil, nil); err != nil {
		unix.Close(kq)
		return handle{id: id, fd: -1}, errors.Is(err, unix.ESRCH)
	}
	return handle{id: id, fd: kq}, false
}

// openVerified registers the exit watch, then checks that the pid still is
// that process. Anything but Alive returns no handle.
func openVerified(r *statReader, id Identity) (handle, State) {
	h, absent := pidfdHandle(id)
	if absent {
		return handle{fd: -1}, PidAbsent
	}
	if st := probeOne(r, id); st != Alive {
		h.close()
		return handle{fd: -1}, st
	}
	return h, Alive
}

// signal: kill(2) after the identity is checked again (macOS cannot
// signal through a handle).
func (h handle) signal(r *statReader, sig syscall.Signal) error {
	return killVerified(r, h.id, sig)
}

func (h handle) close() {
	if h.fd >= 0 {
		unix.Close(h.fd)
	}
}

// pollExited waits up to timeoutMs for any handle's process to exit and
// reports which did: a handle's kqueue is readable once its NOTE_EXIT is
// pending, and the event is never retrieved, so it stays readable. One
// kevent(2) on a fresh kqueue watching them all (EVFILT_READ).
func pollExited(hs []handle, timeoutMs int) ([]bool, error) {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, err
	}
	defer unix.Close(kq)
	changes := make([]unix.Kevent_t, 0, len(hs))
	at := make(map[uint64]int, len(hs))
	for i, h := range hs {
		if h.fd >= 0 {
			changes = append(changes, unix.Kevent_t{Ident: uint64(h.fd), Filter: unix.EVFILT_READ, Flags: unix.EV_ADD})
			at[uint64(h.fd)] = i
		}
	}
	ts := unix.NsecToTimespec(int64(timeoutMs) * 1e6)
	events := make([]unix.Kevent_t, len(changes))
	var n int
	for {
		n, err = unix.Kevent(kq, changes, events, &ts)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(hs))
	for _, ev := range events[:n] {
		if i, ok := at[ev.Ident]; ok {
			out[i] = true
		}
	}
	return out, nil
}
