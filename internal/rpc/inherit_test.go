package rpc

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// bound binds a unix listener at dir/s.sock the way systemd leaves it: not
// unlinked by us, mode as given.
func bound(t *testing.T, dir string, mode os.FileMode) *net.UnixListener {
	t.Helper()
	path := filepath.Join(dir, "s.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	t.Cleanup(func() { l.Close() })
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAdopt(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Run("private dir, open socket narrowed, never unlinked", func(t *testing.T) {
		dir := filepath.Join(shortDir(t), "run")
		os.Mkdir(dir, 0o700)
		l := bound(t, dir, 0o666)
		path, err := Adopt(l, log)
		if err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket mode %v, want 0600", fi.Mode())
		}
		l.Close()
		if _, err := os.Lstat(path); err != nil {
			t.Fatalf("adopted socket unlinked on Close: %v", err)
		}
	})
	t.Run("open dir refused", func(t *testing.T) {
		dir := filepath.Join(shortDir(t), "run")
		os.Mkdir(dir, 0o700)
		l := bound(t, dir, 0o600)
		os.Chmod(dir, 0o755) // systemd's default DirectoryMode
		if _, err := Adopt(l, log); !errors.Is(err, ErrUnsafeDir) {
			t.Fatalf("err = %v, want ErrUnsafeDir", err)
		}
	})
}
