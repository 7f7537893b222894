package daemontest

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// activated returns a command that runs bin with args the way systemd
// starts a socket-activated service: the listener as fd 3, LISTEN_FDS=1,
// and LISTEN_PID equal to the daemon's pid (a shell sets it to its own pid
// and execs the daemon, so the pid is the same). The descriptor given to
// the child is a dup, closed at the test's cleanup.
func activated(t testing.TB, l *net.UnixListener, bin string, args []string) *exec.Cmd {
	t.Helper()
	f, err := l.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cmd := exec.Command("/bin/sh", append([]string{"-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, bin}, args...)...)
	cmd.ExtraFiles = []*os.File{f} // fd 3 in the child
	return cmd
}
