package systemd

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"
)

// notifyTimeout bounds one notification's send.
const notifyTimeout = time.Second

// Notifier sends sd_notify(3) states ("READY=1", "STOPPING=1") to the
// datagram socket systemd named in NOTIFY_SOCKET. A nil or empty Notifier
// (not started by systemd with Type=notify) does nothing.
type Notifier struct {
	addr string
}

// NewNotifier reads NOTIFY_SOCKET: an absolute path or an abstract name
// starting with '@'. Unset gives a Notifier that does nothing.
func NewNotifier(getenv func(string) string) (*Notifier, error) {
	addr := getenv("NOTIFY_SOCKET")
	if addr == "" {
		return &Notifier{}, nil
	}
	if !strings.HasPrefix(addr, "/") && !strings.HasPrefix(addr, "@") {
		return nil, fmt.Errorf("NOTIFY_SOCKET=%q: want an absolute path or an @abstract name", prefix(addr))
	}
	return &Notifier{addr: addr}, nil
}

// Enabled reports whether a notification socket is set.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != "" }

// Notify sends one datagram with state (newline-separated KEY=value
// lines). Go's net package maps a leading '@' to the abstract namespace.
func (n *Notifier) Notify(state string) error {
	if !n.Enabled() {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify %s%s: %w", n.addr, notifyTarget(n.addr), err)
	}
	defer c.Close()
	// A receiver whose queue is full must never block startup or
	// shutdown: the datagram is given up after notifyTimeout.
	c.SetWriteDeadline(time.Now().Add(notifyTimeout))
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify %s: %w", n.addr, err)
	}
	return nil
}

// notifyTarget says what a NOTIFY_SOCKET path that refused a datagram is,
// when that explains it: missing, or not a socket at all.
func notifyTarget(addr string) string {
	if strings.HasPrefix(addr, "@") {
		return ""
	}
	fi, err := os.Stat(addr)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return " (no such file: the manager that set NOTIFY_SOCKET is gone, or it is not this system's)"
	case err != nil:
		return ""
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Sprintf(" (a %s, not a socket; want systemd's datagram socket)", fileKind(fi.Mode()))
	}
	return ""
}

// fileKind names a file mode's type for a message.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "regular file"
	}
}
