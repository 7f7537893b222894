package rpc

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestListenModes(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	path := filepath.Join(shortDir(t), "run", "s.sock")
	l, err := Listen(path, log)
	if err != nil {
		t.Fatal(err)
	}
	di, _ := os.Stat(filepath.Dir(path))
	si, _ := os.Stat(path)
	if di.Mode().Perm() != 0o700 || si.Mode().Perm() != 0o600 || si.Mode()&os.ModeSocket == 0 {
		t.Fatalf("dir %v socket %v, want 0700 and 0600 socket", di.Mode(), si.Mode())
	}
	// A live daemon is never replaced.
	if _, err := Listen(path, log); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("second Listen: %v, want ErrSocketInUse", err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("live socket was touched: %v", err)
	}
	c.Close()
	l.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Close: %v", err)
	}
}

func TestListenReplacesStale(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	// A stale socket file: bound, then its listener gone without unlinking.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	os.Chmod(filepath.Dir(path), 0o700)
	l2, err := Listen(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
}

func TestListenKeepsNonSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	os.WriteFile(path, []byte("precious"), 0o600)
	if _, err := Listen(path, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("err = %v, want ErrNotSocket", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("a regular file at the socket path was replaced")
	}
}

func TestListenRefusesOpenDir(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
	}{{"group readable", 0o750}, {"world open", 0o777}, {"group writable", 0o720}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(shortDir(t), "run")
			os.Mkdir(dir, 0o700)
			os.Chmod(dir, tc.mode)
			if _, err := Listen(filepath.Join(dir, "s.sock"), slog.New(slog.DiscardHandler)); !errors.Is(err, ErrUnsafeDir) {
				t.Fatalf("err = %v, want ErrUnsafeDir", err)
			}
		})
	}
	t.Run("owned by another uid", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to chown")
		}
		dir := filepath.Join(shortDir(t), "run")
		os.Mkdir(dir, 0o700)
		os.Chown(dir, 65534, 65534)
		if _, err := Listen(filepath.Join(dir, "s.sock"), slog.New(slog.DiscardHandler)); !errors.Is(err, ErrUnsafeDir) {
			t.Fatalf("err = %v, want ErrUnsafeDir", err)
		}
	})
}

func TestSocketPath(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name, flag string
		env        map[string]string
		want       string
	}{
		{"flag", "/f.sock", map[string]string{"SESSIOND_SOCKET": "/e.sock"}, "/f.sock"},
		{"env", "", map[string]string{"SESSIOND_SOCKET": "/e.sock", "XDG_RUNTIME_DIR": "/run/u"}, "/e.sock"},
		{"xdg", "", map[string]string{"XDG_RUNTIME_DIR": "/run/u"}, "/run/u/sessiond/sessiond.sock"},
		{"tmp", "", nil, filepath.Join("/tmp", "sessiond-"+itoa(os.Getuid()), "sessiond.sock")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SocketPath(tc.flag, env(tc.env)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPeerUIDRefused: a peer whose uid differs is closed, logged, counted,
// and never reaches the backend.
func TestPeerUIDRefused(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	ts.srv.euid.Store(int64(os.Geteuid() + 1)) // pretend the daemon runs as someone else
	for _, f := range framings {
		r := ts.raw(t, f)
		r.expectClosed() // closed before anything is read
	}
	ts.logs.waitFor(t, 2, "peer refused", "peer_uid=")
	if n := ts.srv.stats.refusedPeers.Load(); n != 2 {
		t.Fatalf("refusedPeers = %d, want 2", n)
	}
	select {
	case id := <-ts.fake.closedCh:
		t.Fatalf("ConnClosed(%s) for a refused peer", id)
	case <-time.After(0):
	}
}
