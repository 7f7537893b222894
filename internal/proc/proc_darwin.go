package proc

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sys/unix"
)

// macOS has no /proc: one sysctl per question, each a thin wrapper with
// its man page named. What this cannot see: processes of other users
// (kern.procargs2 is refused for them, so their tags are unread).

// errNoProc: the pid does not exist.
var errNoProc = errors.New("proc: no such process")

var bootIDCache struct {
	sync.Once
	id  string
	err error
}

// BootID: sysctl kern.boottime (sysctl(3)), the boot's wall-clock start,
// which differs on every boot.
func BootID() (string, error) {
	bootIDCache.Do(func() {
		tv, err := unix.SysctlTimeval("kern.boottime")
		if err != nil {
			bootIDCache.err = errors.Join(ErrUnsupported, err)
			return
		}
		bootIDCache.id = fmt.Sprintf("boottime-%d.%06d", tv.Sec, tv.Usec)
	})
	return bootIDCache.id, bootIDCache.err
}

// statReader has no state here: every read is its own sysctl.
type statReader struct{}

func newStatReader() (*statReader, error) { return &statReader{}, nil }

func (r *statReader) close() {}

// sZomb is SZOMB of <sys/proc.h>: exited, not yet reaped.
const sZomb = 5

// read: sysctl {CTL_KERN, KERN_PROC, KERN_PROC_PID, pid} (sysctl(3)) for
// the parent, group, state and start time (microseconds since the epoch,
// as StartTicks), getsid(2) for the session. A pid that does not exist
// answers no record, which x/sys reports as EIO.
func (r *statReader) read(pid int) (statInfo, error) {
	if pid <= 0 {
		return statInfo{}, errNoProc
	}
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if errors.Is(err, unix.EIO) || err == nil && int(k.Proc.P_pid) != pid {
		return statInfo{}, errNoProc
	}
	if err != nil {
		return statInfo{}, err
	}
	st := statInfo{State: 'S', PPID: int(k.Eproc.Ppid), PGID: int(k.Eproc.Pgid), NumThreads: 1,
		StartTicks: uint64(k.Proc.P_starttime.Sec)*1e6 + uint64(k.Proc.P_starttime.Usec)}
	if k.Proc.P_stat == sZomb {
		st.State = 'Z'
	}
	if sid, err := unix.Getsid(pid); err == nil {
		st.SID = sid
	}
	return st, nil
}

// environ: sysctl {CTL_KERN, KERN_PROCARGS2, pid} (sysctl(3)); only the
// caller's own processes answer.
func (r *statReader) environ(pid int, buf []byte) ([]byte, error) {
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ESRCH) {
			return buf[:0], errNoProc
		}
		return buf[:0], err
	}
	return procArgsEnv(b, buf)
}

// listPIDs: sysctl {CTL_KERN, KERN_PROC, KERN_PROC_ALL} (sysctl(3)).
func listPIDs() ([]int, error) {
	ks, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, errors.Join(ErrCannotEnumerate, err)
	}
	pids := make([]int, 0, len(ks))
	for i := range ks {
		if p := int(ks[i].Proc.P_pid); p > 0 {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// OrphansReaped is always 0: macOS has no subreaper.
func OrphansReaped() uint64 { return 0 }

// SetSubreaper: macOS has no subreaper; a detached descendant reparents
// to launchd (docs/operations.md "macOS").
func SetSubreaper(*slog.Logger) (func(), error) { return nil, ErrUnsupported }
