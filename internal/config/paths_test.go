package config

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestMacOSLayout: with no flag, SESSIOND_* or XDG variable, macOS keeps
// state and config under ~/Library/Application Support/sessiond and the
// socket under $TMPDIR; XDG variables still win where set.
func TestMacOSLayout(t *testing.T) {
	env := func(m map[string]string) Getenv { return func(k string) string { return m[k] } }
	home := map[string]string{"HOME": "/Users/u", "TMPDIR": "/var/folders/ab/xyz/T/"}
	if p, _ := MacOS.ConfigPath("", env(home)); p != "/Users/u/Library/Application Support/sessiond/config.toml" {
		t.Fatalf("config = %s", p)
	}
	if d, _ := MacOS.StateDir("", env(home)); d != "/Users/u/Library/Application Support/sessiond" {
		t.Fatalf("state = %s", d)
	}
	if s := MacOS.SocketPath("", env(home)); s != "/var/folders/ab/xyz/T/sessiond/sessiond.sock" {
		t.Fatalf("socket = %s", s)
	}
	xdg := map[string]string{"HOME": "/Users/u", "TMPDIR": "/t", "XDG_RUNTIME_DIR": "/r", "XDG_STATE_HOME": "/s", "XDG_CONFIG_HOME": "/c"}
	if s := MacOS.SocketPath("", env(xdg)); s != "/r/sessiond/sessiond.sock" {
		t.Fatalf("socket with XDG_RUNTIME_DIR = %s", s)
	}
	if d, _ := MacOS.StateDir("", env(xdg)); d != "/s/sessiond" {
		t.Fatalf("state with XDG_STATE_HOME = %s", d)
	}
	if p, _ := MacOS.ConfigPath("", env(xdg)); p != "/c/sessiond/config.toml" {
		t.Fatalf("config with XDG_CONFIG_HOME = %s", p)
	}
	tmp := filepath.Join("/tmp", "sessiond-"+strconv.Itoa(os.Getuid()), "sessiond.sock")
	if s := MacOS.SocketPath("", env(map[string]string{"HOME": "/Users/u"})); s != tmp {
		t.Fatalf("socket without TMPDIR = %s, want %s", s, tmp)
	}
	// Linux ignores TMPDIR: /tmp/sessiond-$UID when XDG_RUNTIME_DIR is unset.
	if s := XDG.SocketPath("", env(home)); s != tmp {
		t.Fatalf("XDG socket = %s, want %s", s, tmp)
	}
}
