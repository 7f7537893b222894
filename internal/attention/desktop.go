package attention

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

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

// Notify implements Desktop. The body is escaped: a server with the
// body-markup capability reads it as markup, and a title is the user's
// text, not markup.
func (FreedesktopNotify) Notify(ctx context.Context, summary, body string) error {
	addr, err := sessionBusAddress()
	if err != nil {
		return err
	}
	var sw fdSweeper // a notification service hands out no descriptor: any is closed
	conn, err := dbus.Connect(addr, dbus.WithContext(ctx), dbus.WithIncomingInterceptor(sw.intercept))
	if err != nil {
		return fmt.Errorf("session bus: %w", err)
	}
	defer sw.finish(-1)
	defer conn.Close()
	var id uint32
	return conn.Object("org.freedesktop.Notifications", "/org/freedesktop/Notifications").CallWithContext(ctx,
		"org.freedesktop.Notifications.Notify", 0,
		"sessiond", uint32(0), "", summary, markupEscaper.Replace(body), []string{}, map[string]dbus.Variant{}, int32(-1)).Store(&id)
}

// markupEscaper escapes the characters the notification spec's markup
// gives meaning to.
var markupEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

// ErrNoSessionBus is the session bus's address not being known.
var ErrNoSessionBus = errors.New("no session bus: DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus does not exist")

// sessionBusAddress is $DBUS_SESSION_BUS_ADDRESS, else the standard
// $XDG_RUNTIME_DIR/bus. Never godbus's own discovery: it would set the
// daemon's environment (which providers inherit) and run dbus-launch,
// which starts a bus.
func sessionBusAddress() (string, error) {
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" {
		return a, nil
	}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		p := filepath.Join(dir, "bus")
		if fi, err := os.Stat(p); err == nil && fi.Mode().Type() == fs.ModeSocket {
			return "unix:path=" + dbus.EscapeBusAddressValue(p), nil
		}
	}
	return "", ErrNoSessionBus
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
