package systemd

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "sdu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// rawSocket returns a descriptor of a fresh socket of typ, bound to path
// (unless empty) and listening when listen is set; closed at cleanup.
func rawSocket(t *testing.T, typ int, path string, listen bool) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, typ, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.CloseOnExec(fd)
	t.Cleanup(func() { unix.Close(fd) })
	if path != "" {
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			t.Fatal(err)
		}
	}
	if listen {
		if err := unix.Listen(fd, 8); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

func TestInheritedRefuses(t *testing.T) {
	pid := os.Getpid()
	ok := map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "1"}
	dir := shortDir(t)
	good := rawSocket(t, unix.SOCK_STREAM, filepath.Join(dir, "good.sock"), true)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	tests := []struct {
		name string
		env  map[string]string
		fd   int
		want string
	}{
		{"another pid", map[string]string{"LISTEN_PID": strconv.Itoa(pid + 1), "LISTEN_FDS": "1"}, good, "names another process"},
		{"pid not a number", map[string]string{"LISTEN_PID": "12x", "LISTEN_FDS": "1"}, good, "is not a pid"},
		{"fds without pid", map[string]string{"LISTEN_FDS": "1"}, good, "is not a pid"},
		{"pid without fds", map[string]string{"LISTEN_PID": strconv.Itoa(pid)}, good, "exactly one socket"},
		{"two fds", map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "2"}, good, "exactly one socket"},
		{"long value echoed short", map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": strings.Repeat("9", 500)}, good, "…"},
		{"a pipe", ok, passed(t, int(r.Fd())), `fd N is a pipe "pipe:[`},
		{"a pipe of this process", ok, int(w.Fd()), "nothing was passed at fd"},
		{"closed fd", ok, 987, "nothing was passed at fd 987 (it is not open"},
		{"a directory", ok, passed(t, openFD(t, dir)), `fd N is a directory "` + dir + `", not a socket`},
		{"a regular file", ok, passed(t, openFD(t, "/proc/self/status")), `fd N is a regular file`},
		{"datagram", ok, passed(t, rawSocket(t, unix.SOCK_DGRAM, filepath.Join(dir, "dg.sock"), false)),
			"fd N is an AF_UNIX datagram (SOCK_DGRAM) socket, not a stream socket"},
		{"not listening", ok, passed(t, rawSocket(t, unix.SOCK_STREAM, filepath.Join(dir, "nl.sock"), false)),
			"fd N is an AF_UNIX stream socket that is not listening"},
		{"abstract", ok, rawSocket(t, unix.SOCK_STREAM, "@sessiond-test-"+strconv.Itoa(pid), true), "abstract"},
		{"tcp listening", ok, passed(t, inetSocket(t, unix.SOCK_STREAM, true)), "fd N is an AF_INET socket, not AF_UNIX"},
		{"udp", ok, passed(t, inetSocket(t, unix.SOCK_DGRAM, false)), "fd N is an AF_INET socket, not AF_UNIX"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.want = strings.ReplaceAll(tc.want, "fd N ", "fd "+strconv.Itoa(tc.fd)+" ")
			l, err := Inherited(env(tc.env), pid, tc.fd)
			if !errors.Is(err, ErrActivation) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrActivation with %q", err, tc.want)
			}
			if l != nil {
				t.Fatal("a listener came back with an error")
			}
			if tc.env["LISTEN_FDS"] == "1" && tc.env["LISTEN_PID"] == strconv.Itoa(pid) && !strings.Contains(err.Error(), "want ") {
				t.Fatalf("err = %v: does not say what was wanted", err)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error echoes too much: %d bytes", len(err.Error()))
			}
		})
	}
}

// passed marks fd as systemd passes a descriptor: without close-on-exec.
func passed(t *testing.T, fd int) int {
	t.Helper()
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	return fd
}

// openFD opens path read-only; closed at cleanup.
func openFD(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// inetSocket is a loopback IPv4 socket of typ, listening when listen is set.
func inetSocket(t *testing.T, typ int, listen bool) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, typ, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.CloseOnExec(fd)
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if listen {
		if err := unix.Listen(fd, 8); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

func TestInheritedNotActivated(t *testing.T) {
	l, err := Inherited(env(nil), os.Getpid(), 3)
	if l != nil || err != nil {
		t.Fatalf("got %v, %v; want nil, nil without LISTEN_*", l, err)
	}
}

// TestInheritedServes: a good descriptor becomes a listener that accepts,
// is close-on-exec, and leaves the socket file in place when closed.
func TestInheritedServes(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0) // no CLOEXEC, as systemd passes it
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 8); err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	l, err := Inherited(env(map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "1"}), pid, fd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Fatal("the passed descriptor is still open: the listener holds a dup, the original must be closed")
	}
	if got := l.Addr().String(); got != path {
		t.Fatalf("addr %s, want %s", got, path)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	c.Close()
	l.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket file gone after Close (systemd owns it): %v", err)
	}
}

func TestNotify(t *testing.T) {
	for _, name := range []string{filepath.Join(shortDir(t), "notify"), "@sessiond-notify-" + strconv.Itoa(os.Getpid())} {
		t.Run(name[:1], func(t *testing.T) {
			pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			n, err := NewNotifier(env(map[string]string{"NOTIFY_SOCKET": name}))
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Notify("READY=1"); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			k, _, err := pc.ReadFrom(buf)
			if err != nil || string(buf[:k]) != "READY=1" {
				t.Fatalf("got %q, %v", buf[:k], err)
			}
		})
	}
	// A receiver whose queue is full: the send gives up, it never blocks.
	full := filepath.Join(shortDir(t), "full")
	pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: full, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	n, err := NewNotifier(env(map[string]string{"NOTIFY_SOCKET": full}))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if err := n.Notify("STATUS=filling"); err != nil {
			break // the queue is full and the send gave up
		}
		if i > 100000 {
			t.Fatal("the receiver's queue never filled")
		}
	}
	// A path that is missing or no socket: the error says which.
	dir := shortDir(t)
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o600)
	for name, want := range map[string]string{
		filepath.Join(dir, "missing"): "the manager that set NOTIFY_SOCKET is gone",
		filepath.Join(dir, "file"):    "a regular file, not a socket",
		dir:                           "a directory, not a socket",
	} {
		n, err := NewNotifier(env(map[string]string{"NOTIFY_SOCKET": name}))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Notify("READY=1"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NOTIFY_SOCKET=%s: %v, want %q", name, err, want)
		}
	}
	if _, err := NewNotifier(env(map[string]string{"NOTIFY_SOCKET": "relative/x"})); err == nil {
		t.Fatal("a relative NOTIFY_SOCKET was accepted")
	}
	n, err = NewNotifier(env(nil))
	if err != nil || n.Enabled() || n.Notify("READY=1") != nil {
		t.Fatalf("unset NOTIFY_SOCKET: %v enabled=%v", err, n.Enabled())
	}
}
