package rpc

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/config"
)

// ErrSocketInUse: a live daemon accepts on the socket; it is never replaced.
var ErrSocketInUse = errors.New("another sessiond is accepting on this socket")

// ErrNotSocket: something other than a socket sits at the socket path; it
// is never removed.
var ErrNotSocket = errors.New("socket path is taken by a non-socket file")

// ErrUnsafeDir: the socket's directory is not owned by us or is open to others.
var ErrUnsafeDir = errors.New("socket directory is not private")

// SocketPath resolves the socket: --socket, $SESSIOND_SOCKET, then the
// platform's default (config.Layout.SocketPath).
func SocketPath(flag string, getenv func(string) string) string {
	return config.SocketPath(flag, getenv)
}

// Listen binds the daemon's socket: its directory is created 0700 (an
// existing one must be owned by the euid and closed to group and others),
// an existing socket file is dialled first and only unlinked when nobody
// accepts on it, and the socket is 0600. Closing the listener removes it.
func Listen(path string, log *slog.Logger) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket %s: exists and is not a socket (%v): %w", path, fi.Mode(), ErrNotSocket)
		}
		c, derr := net.DialTimeout("unix", path, time.Second)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s: %w", path, ErrSocketInUse)
		}
		log.Info("replacing stale socket", "socket", path, "cause", derr.Error())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("socket %s: remove stale: %w", path, err)
		}
	}
	// The directory is private, so the moment between bind and chmod is
	// harmless (a process-wide umask would race other goroutines' files).
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	l.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return l, nil
}

func privateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("socket dir %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("socket dir %s: %w", dir, err)
	}
	return checkPrivateDir(dir)
}

// checkPrivateDir: dir is a directory owned by the euid and closed to
// group and others.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket dir %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("socket dir %s: not a directory: %w", dir, ErrUnsafeDir)
	case ok && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("socket dir %s: owned by uid %d, not %d: %w", dir, st.Uid, os.Geteuid(), ErrUnsafeDir)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("socket dir %s: mode %04o is open to group or others: %w", dir, fi.Mode().Perm(), ErrUnsafeDir)
	}
	return nil
}
