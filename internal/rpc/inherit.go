package rpc

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
)

// Adopt checks a listening socket the daemon did not bind itself (systemd
// socket activation) as Listen checks its own: its directory must exist,
// be owned by the euid and be closed to group and others (the socket unit's
// DirectoryMode=0700), and the path must be a socket; a socket open to
// group or others is narrowed to 0600. The file is never unlinked: it
// belongs to the socket unit, which keeps accepting while the daemon is
// down. Adopt returns the socket's path.
func Adopt(l *net.UnixListener, log *slog.Logger) (string, error) {
	l.SetUnlinkOnClose(false)
	path := l.Addr().String()
	if path == "" || !filepath.IsAbs(path) {
		return "", fmt.Errorf("inherited socket %q: want an absolute path: %w", path, ErrUnsafeDir)
	}
	if err := checkPrivateDir(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("inherited socket %s: %w (set DirectoryMode=0700 in the socket unit)", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("inherited socket %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return "", fmt.Errorf("inherited socket %s: not a socket (%v): %w", path, fi.Mode(), ErrNotSocket)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("inherited socket %s: mode %04o: %w", path, perm, err)
		}
		log.Warn("inherited socket was open to group or others; narrowed to 0600 (set SocketMode=0600 in the socket unit)",
			"socket", path, "mode", fmt.Sprintf("%04o", perm))
	}
	return path, nil
}
