// Package systemd speaks the two systemd protocols sessiond needs, in a few
// lines of its own rather than github.com/coreos/go-systemd: socket
// activation (LISTEN_PID, LISTEN_FDS, fd 3; sd_listen_fds(3)) and
// readiness notification (NOTIFY_SOCKET; sd_notify(3)). Both are small,
// stable, documented protocols; the project keeps its dependency list to
// what it needs.
package systemd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ListenFDsStart is the first descriptor systemd passes (SD_LISTEN_FDS_START).
const ListenFDsStart = 3

// ErrActivation: LISTEN_PID/LISTEN_FDS are set but do not describe exactly
// one listening AF_UNIX stream socket passed to this process.
var ErrActivation = errors.New("bad socket activation")

// envVars are the variables a started child must not inherit: another
// process reading LISTEN_FDS would take descriptors that are not its own,
// and NOTIFY_SOCKET would let a provider speak for the daemon.
var envVars = []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET"}

// UnsetEnv removes the activation and notification variables from the
// process environment (read them first).
func UnsetEnv() {
	for _, k := range envVars {
		os.Unsetenv(k)
	}
}

// Inherited returns the listening socket systemd passed as fd, or nil when
// neither LISTEN_PID nor LISTEN_FDS is set (not socket-activated). pid is
// this process's pid. Any other combination is an ErrActivation naming
// what was wrong. The returned listener never unlinks its socket file on
// Close: the file belongs to the socket unit. fd is marked close-on-exec.
func Inherited(getenv func(string) string, pid, fd int) (*net.UnixListener, error) {
	lpid, lfds := getenv("LISTEN_PID"), getenv("LISTEN_FDS")
	if lpid == "" && lfds == "" {
		return nil, nil
	}
	p, err := strconv.Atoi(lpid)
	if err != nil || p <= 0 {
		return nil, fmt.Errorf("LISTEN_PID=%q is not a pid (LISTEN_FDS=%q): %w", prefix(lpid), prefix(lfds), ErrActivation)
	}
	if p != pid {
		return nil, fmt.Errorf("LISTEN_PID=%d names another process (this is pid %d): the passed descriptors are not ours: %w",
			p, pid, ErrActivation)
	}
	n, err := strconv.Atoi(lfds)
	if err != nil || n != 1 {
		return nil, fmt.Errorf("LISTEN_FDS=%q: sessiond takes exactly one socket (fd %d): %w", prefix(lfds), fd, ErrActivation)
	}
	path, err := checkListening(fd)
	if err != nil {
		return nil, fmt.Errorf("fd %d: %w: %w", fd, err, ErrActivation)
	}
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "systemd:"+path)
	l, err := net.FileListener(f) // a dup; the original is closed below
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("fd %d: %w: %w", fd, err, ErrActivation)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("fd %d: a %T, not a unix listener: %w", fd, l, ErrActivation)
	}
	ul.SetUnlinkOnClose(false)
	return ul, nil
}

// checkListening proves fd is a listening AF_UNIX stream socket bound to a
// path, and returns the path.
func checkListening(fd int) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("not open: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return "", fmt.Errorf("not a socket (file mode %#o)", st.Mode&unix.S_IFMT)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return "", fmt.Errorf("getsockname: %w", err)
	}
	su, ok := sa.(*unix.SockaddrUnix)
	if !ok {
		return "", fmt.Errorf("not an AF_UNIX socket (%s)", family(sa))
	}
	if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return "", fmt.Errorf("not a stream socket (type %d; want ListenStream=)", typ)
	}
	if acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || acc != 1 {
		return "", errors.New("not listening (Accept=no and a ListenStream= socket are required)")
	}
	if su.Name == "" {
		return "", errors.New("not bound to a path")
	}
	if su.Name[0] == '@' || su.Name[0] == 0 {
		return "", fmt.Errorf("bound to the abstract name %q: want a path in a private directory", prefix(su.Name))
	}
	return su.Name, nil
}

// family names a socket address's family for an error message.
func family(sa unix.Sockaddr) string {
	switch sa.(type) {
	case *unix.SockaddrInet4:
		return "AF_INET"
	case *unix.SockaddrInet6:
		return "AF_INET6"
	default:
		return fmt.Sprintf("%T", sa)
	}
}

// prefix is at most 32 bytes of a bad value, for an error message.
func prefix(s string) string {
	const n = 32
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
