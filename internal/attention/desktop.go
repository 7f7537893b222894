package attention

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"

	"github.com/godbus/dbus/v5"
)

// Desktop posts desktop notifications. Implementations: FreedesktopNotify
// (org.freedesktop.Notifications on the session bus) and Osascript (macOS,
// not verified at runtime here).
type Desktop interface {
	Notify(ctx context.Context, summary, body string) error
}

// FreedesktopNotify calls org.freedesktop.Notifications.Notify on the
// session bus ($DBUS_SESSION_BUS_ADDRESS), one connection per call (a
// notification is rare; a bus restarted meanwhile costs nothing).
type FreedesktopNotify struct{}

// Notify implements Desktop.
func (FreedesktopNotify) Notify(ctx context.Context, summary, body string) error {
	conn, err := dbus.ConnectSessionBus(dbus.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("session bus: %w", err)
	}
	defer conn.Close()
	var id uint32
	return conn.Object("org.freedesktop.Notifications", "/org/freedesktop/Notifications").CallWithContext(ctx,
		"org.freedesktop.Notifications.Notify", 0,
		"sessiond", uint32(0), "", summary, body, []string{}, map[string]dbus.Variant{}, int32(-1)).Store(&id)
}

// Osascript posts through `osascript -e 'display notification …'`.
type Osascript struct{}

// Notify implements Desktop.
func (Osascript) Notify(ctx context.Context, summary, body string) error {
	script := "display notification " + strconv.Quote(body) + " with title " + strconv.Quote(summary)
	if out, err := exec.CommandContext(ctx, "osascript", "-e", script).CombinedOutput(); err != nil {
		return fmt.Errorf("osascript: %w: %s", err, out)
	}
	return nil
}
