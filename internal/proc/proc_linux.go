package proc

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errNoProc: the pid has no /proc entry (the process does not exist).
var errNoProc = errors.New("proc: no such process")

// procDir is where the process table is read (a variable so tests can make
// it unreadable).
var procDir atomic.Pointer[string]

func procPath() string {
	if p := procDir.Load(); p != nil {
		return *p
	}
	return "/proc"
}

var bootIDCache struct {
	sync.Mutex
	id string
}

// BootID returns the kernel's boot id (read once, then cached: it cannot
// change while we run).
func BootID() (string, error) {
	bootIDCache.Lock()
	defer bootIDCache.Unlock()
	if bootIDCache.id != "" {
		return bootIDCache.id, nil
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", errors.Join(ErrUnsupported, err)
	}
	id := string(bytes.TrimSpace(b))
	if id == "" {
		return "", ErrUnsupported
	}
	bootIDCache.id = id
	return id, nil
}

// statReader reads /proc/<pid>/stat with one reused buffer and a dirfd on
// /proc: an openat, a read and a close per pid, no allocation.
type statReader struct {
	procfd int
	path   [32]byte
	buf    [1024]byte
}

func newStatReader() (*statReader, error) {
	fd, err := unix.Open(procPath(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errors.Join(ErrCannotEnumerate, err)
	}
	// An unmounted /proc is an empty directory: every pid would look absent.
	var st unix.Stat_t
	if err := unix.Fstatat(fd, "self/stat", &st, 0); err != nil {
		unix.Close(fd)
		return nil, errors.Join(ErrCannotEnumerate, err)
	}
	return &statReader{procfd: fd}, nil
}

func (r *statReader) close() { unix.Close(r.procfd) }

// openat opens "<pid>/<name>" under /proc without allocating a path string.
func (r *statReader) openat(pid int, name string) (int, error) {
	p := strconv.AppendInt(r.path[:0], int64(pid), 10)
	p = append(p, '/')
	p = append(p, name...)
	p = append(p, 0)
	for {
		fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(r.procfd), uintptr(unsafe.Pointer(&p[0])),
			uintptr(unix.O_RDONLY|unix.O_CLOEXEC), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			if e == unix.ENOENT || e == unix.ESRCH {
				return -1, errNoProc
			}
			return -1, e
		}
		return int(fd), nil
	}
}

func (r *statReader) read(pid int) (statInfo, error) {
	if pid <= 0 {
		return statInfo{}, errNoProc
	}
	fd, err := r.openat(pid, "stat")
	if err != nil {
		return statInfo{}, err
	}
	n, err := readFull(fd, r.buf[:])
	unix.Close(fd)
	if err != nil {
		if err == unix.ESRCH {
			return statInfo{}, errNoProc
		}
		return statInfo{}, err
	}
	return parseStat(r.buf[:n])
}

// environ reads /proc/<pid>/environ into buf (grown as needed).
func (r *statReader) environ(pid int, buf []byte) ([]byte, error) {
	fd, err := r.openat(pid, "environ")
	if err != nil {
		return buf[:0], err
	}
	defer unix.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			if err == unix.ESRCH {
				return buf[:0], errNoProc
			}
			return buf[:0], err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func readFull(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

// listPIDs lists the numeric entries of /proc.
func listPIDs() ([]int, error) {
	f, err := os.Open(procPath())
	if err != nil {
		return nil, errors.Join(ErrCannotEnumerate, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, errors.Join(ErrCannotEnumerate, err)
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		// a /proc without even our own pid is not a process table
		return nil, ErrCannotEnumerate
	}
	return pids, nil
}
