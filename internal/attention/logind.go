package attention

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// logind's bus name, object and method (org.freedesktop.login1(5)).
const (
	logindName   = "org.freedesktop.login1"
	logindPath   = dbus.ObjectPath("/org/freedesktop/login1")
	logindMethod = "org.freedesktop.login1.Manager.Inhibit"
	// InhibitWhat and InhibitMode are what the daemon asks for.
	InhibitWhat = "sleep:idle"
	InhibitMode = "block"
	InhibitWho  = "sessiond"
)

// Logind takes systemd-logind inhibitors over the system bus
// ($DBUS_SYSTEM_BUS_ADDRESS, else the standard socket): Inhibit answers
// a descriptor, and the inhibitor lasts until every copy of it is closed,
// so it also ends with the daemon's process.
type Logind struct{}

// Name implements Inhibitor.
func (Logind) Name() string { return "logind" }

// Probe pings logind (which starts it when it is bus-activated).
func (Logind) Probe(ctx context.Context) error {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("%w: system bus: %w", ErrUnavailable, err)
	}
	defer conn.Close()
	if err := conn.Object(logindName, logindPath).CallWithContext(ctx, "org.freedesktop.DBus.Peer.Ping", 0).Err; err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, logindName, err)
	}
	return nil
}

// Inhibit calls Manager.Inhibit(InhibitWhat, InhibitWho, why, InhibitMode).
// The bus connection is closed at once: the inhibitor is the descriptor.
func (Logind) Inhibit(ctx context.Context, why string) (io.Closer, error) {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("%w: system bus: %w", ErrUnavailable, err)
	}
	defer conn.Close()
	var fd dbus.UnixFD
	if err := conn.Object(logindName, logindPath).CallWithContext(ctx, logindMethod, 0,
		InhibitWhat, InhibitWho, why, InhibitMode).Store(&fd); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, logindMethod, err)
	}
	// Received descriptors are close-on-exec already (MSG_CMSG_CLOEXEC);
	// said again, because a provider child must never keep it.
	unix.CloseOnExec(int(fd))
	return os.NewFile(uintptr(fd), "logind-inhibitor"), nil
}
