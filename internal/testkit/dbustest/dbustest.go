// Package dbustest runs a real dbus-daemon on a private address for the
// attention tests, with small test services on it: Login1 (the part of
// org.freedesktop.login1.Manager that keep-awake uses: Inhibit, handing
// out a pipe's write end and watching its read end) and Notifications
// (org.freedesktop.Notifications.Notify, counted).
//
// systemd-logind itself cannot run in the test container (it needs
// systemd as PID 1, a real seat and the system bus policy), so Login1
// stands in for it: the daemon under test talks real D-Bus, with real
// descriptor passing, to a real bus daemon; only the service behind the
// name is the test's.
//
// Debian's dbus package is installed when dbus-daemon is missing
// (Install, also `go run ./internal/testkit/dbustest/install`, which
// `make test` runs); a test fails with the install command when that is
// impossible, it is never skipped.
package dbustest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/sessiond/sessiond/internal/sysx"
)

// DBusDaemon is where Debian's dbus package puts the bus daemon.
const DBusDaemon = "/usr/bin/dbus-daemon"

// InstallCommand is what Install runs (as root).
const InstallCommand = "apt-get install -y dbus"

// Install installs Debian's dbus package when dbus-daemon is missing.
func Install() error {
	if _, err := os.Stat(DBusDaemon); err == nil {
		return nil
	}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	out, err := run("apt-get", "install", "-y", "dbus")
	if err != nil {
		// A fresh image has no package lists yet.
		if _, uerr := run("apt-get", "update"); uerr == nil {
			out, err = run("apt-get", "install", "-y", "dbus")
		}
	}
	if err != nil {
		return fmt.Errorf("dbus-daemon (%s) is missing and `%s` failed (run it as root): %w\n%s", DBusDaemon, InstallCommand, err, out)
	}
	if _, err := os.Stat(DBusDaemon); err != nil {
		return fmt.Errorf("`%s` left no %s: %w", InstallCommand, DBusDaemon, err)
	}
	return nil
}

// busConfig is a session-style bus: anyone (this uid) may own any name
// and call anything, on one private socket.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// Bus is a running dbus-daemon.
type Bus struct {
	Address string // unix:path=…, for DBUS_SYSTEM_BUS_ADDRESS / DBUS_SESSION_BUS_ADDRESS
	cmd     *exec.Cmd
}

// StartBus runs a private dbus-daemon (installing it if missing) and
// stops it in t.Cleanup.
func StartBus(t testing.TB) *Bus {
	t.Helper()
	if err := Install(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sdbus") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "bus")
	cfg := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, busConfig, sock), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(DBusDaemon, "--config-file="+cfg, "--nofork", "--nopidfile", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	sysx.Tie(cmd, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", DBusDaemon, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n') // printed once it listens
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v\n%s", err, stderr.String())
	}
	return &Bus{Address: strings.TrimSpace(line), cmd: cmd}
}

// Kill SIGKILLs the bus daemon and waits for it: the bus dies under its
// clients.
func (b *Bus) Kill() {
	b.cmd.Process.Kill()
	b.cmd.Wait()
}

// Connect opens a connection to the bus, closed in t.Cleanup.
func (b *Bus) Connect(t testing.TB) *dbus.Conn {
	t.Helper()
	c, err := dbus.Connect(b.Address)
	if err != nil {
		t.Fatalf("connect %s: %v", b.Address, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// own requests name on c, failing the test when someone else has it.
func own(t testing.TB, c *dbus.Conn, name string) {
	t.Helper()
	r, err := c.RequestName(name, dbus.NameFlagDoNotQueue)
	if err != nil || r != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: reply %v, %v", name, r, err)
	}
}

// within bounds a wait in these helpers: a failure, never a pace.
const within = 30 * time.Second
