//go:build !linux && !darwin

package proc

import (
	"errors"
	"log/slog"
	"syscall"
)

// Outside Linux the package spawns and waits, but it cannot see other
// processes: probes answer Unverifiable (or PidAbsent when kill(pid, 0)
// says ESRCH), scans answer ErrCannotEnumerate, and no pid that is not our
// waited-on child is ever signalled.

var errNoProc = errors.New("proc: no such process")

// BootID is unavailable here.
func BootID() (string, error) { return "", ErrUnsupported }

type statReader struct{}

func newStatReader() (*statReader, error) { return nil, ErrCannotEnumerate }

func (r *statReader) close() {}

func (r *statReader) read(pid int) (statInfo, error) {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return statInfo{}, errNoProc
	}
	return statInfo{}, ErrUnsupported
}

func (r *statReader) environ(int, []byte) ([]byte, error) { return nil, ErrUnsupported }

func listPIDs() ([]int, error) { return nil, ErrCannotEnumerate }

type handle struct {
	id Identity
	fd int
}

func havePidfd() bool { return false }

func pidfdHandle(id Identity) (handle, bool) { return handle{id: id, fd: -1}, false }

func openVerified(*statReader, Identity) (handle, State) { return handle{fd: -1}, Unverifiable }

func (h handle) signal(*statReader, syscall.Signal) error { return ErrUnsupported }

func (h handle) close() {}

func pollExited(hs []handle, _ int) ([]bool, error) { return make([]bool, len(hs)), ErrUnsupported }

// OrphansReaped is always 0 here.
func OrphansReaped() uint64 { return 0 }

// SetSubreaper is Linux only.
func SetSubreaper(*slog.Logger) (func(), error) { return nil, ErrUnsupported }
