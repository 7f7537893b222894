package systemd

import (
	"fmt"
	"net"
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
		return fmt.Errorf("notify %s: %w", n.addr, err)
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
