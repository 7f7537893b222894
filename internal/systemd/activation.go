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
	"unicode/utf8"

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
		return nil, fmt.Errorf("%w: %w", err, ErrActivation)
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
// path, and returns the path. An error says what fd is instead and what
// was wanted.
func checkListening(fd int) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("nothing was passed at fd %d (it is not open: %w); %s", fd, err, wantSocket)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return "", fmt.Errorf("%s %s, not a socket; %s", opener(fd), describeFD(fd, uint32(st.Mode)), wantSocket)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return "", fmt.Errorf("%s a socket whose address cannot be read (getsockname: %w); %s", opener(fd), err, wantSocket)
	}
	su, ok := sa.(*unix.SockaddrUnix)
	if !ok {
		return "", fmt.Errorf("%s an %s socket, not AF_UNIX; %s", opener(fd), family(sa), wantSocket)
	}
	if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return "", fmt.Errorf("%s an AF_UNIX %s socket, not a stream socket; %s", opener(fd), sockType(typ), wantSocket)
	}
	if acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || acc != 1 {
		return "", fmt.Errorf("%s an AF_UNIX stream socket that is not listening (bound to %q); %s", opener(fd), prefix(su.Name), wantSocket)
	}
	if su.Name == "" {
		return "", fmt.Errorf("%s a listening AF_UNIX socket bound to no path; %s", opener(fd), wantSocket)
	}
	if su.Name[0] == '@' || su.Name[0] == 0 {
		return "", fmt.Errorf("%s bound to the abstract name %q; want a path in a private directory", opener(fd), prefix(su.Name))
	}
	return su.Name, nil
}

// wantSocket is what the descriptor must be, for error messages.
const wantSocket = "want a listening AF_UNIX stream socket bound to a path (ListenStream=PATH, Accept=no in the .socket unit)"

// opener begins an error about fd: "fd 3 is", or, when this process
// opened fd itself, "nothing was passed at fd 3: it is". Go opens every
// descriptor close-on-exec and systemd passes its sockets without the
// flag, so a close-on-exec fd 3 was opened here after the exec: the number
// was free (nothing passed) and the runtime or this process took it (Go
// keeps a cgroup CPU-limit file open, for one).
func opener(fd int) string {
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC != 0 {
		return fmt.Sprintf("nothing was passed at fd %d: it is held by this process (close-on-exec) and is", fd)
	}
	return fmt.Sprintf("fd %d is", fd)
}

// describeFD names an open descriptor's kind and, where /proc/self/fd
// tells (Linux), what it points at: a path, pipe:[…], anon_inode:[…].
func describeFD(fd int, mode uint32) string {
	kind := map[uint32]string{
		unix.S_IFREG: "a regular file", unix.S_IFDIR: "a directory", unix.S_IFIFO: "a pipe",
		unix.S_IFCHR: "a character device", unix.S_IFBLK: "a block device", unix.S_IFLNK: "a symlink",
	}[mode&unix.S_IFMT]
	if kind == "" {
		kind = fmt.Sprintf("a descriptor of file mode %#o", mode&unix.S_IFMT)
	}
	if target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil {
		kind += fmt.Sprintf(" %q", prefixN(target, 96))
	}
	return kind
}

// sockType names a socket type for an error message.
func sockType(typ int) string {
	switch typ {
	case unix.SOCK_DGRAM:
		return "datagram (SOCK_DGRAM)"
	case unix.SOCK_SEQPACKET:
		return "seqpacket (SOCK_SEQPACKET)"
	case unix.SOCK_RAW:
		return "raw (SOCK_RAW)"
	default:
		return fmt.Sprintf("type %d", typ)
	}
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
func prefix(s string) string { return prefixN(s, 32) }

// prefixN is at most n bytes of s, never cut inside a UTF-8 sequence,
// with "…" when cut.
func prefixN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
