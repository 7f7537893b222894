package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
)

// ErrNoHome: neither $XDG_STATE_HOME nor a home directory is known.
var ErrNoHome = errors.New("cannot resolve a state directory: set --state-dir, $SESSIOND_STATE_DIR or $HOME")

// Getenv is how paths read the environment (os.Getenv in production).
type Getenv func(string) string

// Layout is where a platform keeps sessiond's files when no flag, no
// SESSIOND_* variable and no XDG variable names a place. Native is this
// platform's (layout_darwin.go, layout_other.go); both are plain data, so
// each is tested on every platform.
type Layout struct {
	StateHome  string // state dir parent, relative to $HOME
	ConfigHome string // config dir parent, relative to $HOME
	// TempEnv names the variable holding a per-user private temp dir that
	// the socket's directory goes in when $XDG_RUNTIME_DIR is unset; when
	// it is "" or unset, /tmp/sessiond-$UID.
	TempEnv string
}

// XDG is the layout of Linux and every platform but macOS.
var XDG = Layout{StateHome: filepath.Join(".local", "state"), ConfigHome: ".config"}

// MacOS keeps state and config in ~/Library/Application Support/sessiond
// and the socket under $TMPDIR, which macOS makes per user and private.
var MacOS = Layout{StateHome: filepath.Join("Library", "Application Support"),
	ConfigHome: filepath.Join("Library", "Application Support"), TempEnv: "TMPDIR"}

// ConfigPath resolves the config file with the native layout.
func ConfigPath(flag string, getenv Getenv) (path string, explicit bool) {
	return Native.ConfigPath(flag, getenv)
}

// StateDir resolves the state directory with the native layout.
func StateDir(flag string, getenv Getenv) (string, error) { return Native.StateDir(flag, getenv) }

// SocketPath resolves the socket with the native layout.
func SocketPath(flag string, getenv Getenv) string { return Native.SocketPath(flag, getenv) }

// ConfigPath resolves the config file: --config, $SESSIOND_CONFIG,
// $XDG_CONFIG_HOME/sessiond/config.toml, ~/<ConfigHome>/sessiond/config.toml.
// explicit is true for the first two (a missing file is then an error).
func (l Layout) ConfigPath(flag string, getenv Getenv) (path string, explicit bool) {
	if flag != "" {
		return flag, true
	}
	if v := getenv("SESSIOND_CONFIG"); v != "" {
		return v, true
	}
	if v := getenv("XDG_CONFIG_HOME"); v != "" {
		return filepath.Join(v, "sessiond", "config.toml"), false
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, l.ConfigHome, "sessiond", "config.toml"), false
	}
	return "", false
}

// StateDir resolves the state directory: --state-dir, $SESSIOND_STATE_DIR,
// $XDG_STATE_HOME/sessiond, ~/<StateHome>/sessiond. The result is absolute.
func (l Layout) StateDir(flag string, getenv Getenv) (string, error) {
	var dir string
	switch {
	case flag != "":
		dir = flag
	case getenv("SESSIOND_STATE_DIR") != "":
		dir = getenv("SESSIOND_STATE_DIR")
	case getenv("XDG_STATE_HOME") != "":
		dir = filepath.Join(getenv("XDG_STATE_HOME"), "sessiond")
	default:
		h := getenv("HOME")
		if h == "" {
			var err error
			if h, err = os.UserHomeDir(); err != nil || h == "" {
				return "", ErrNoHome
			}
		}
		dir = filepath.Join(h, l.StateHome, "sessiond")
	}
	return filepath.Abs(dir)
}

// SocketPath resolves the socket: --socket, $SESSIOND_SOCKET,
// $XDG_RUNTIME_DIR/sessiond/sessiond.sock, $<TempEnv>/sessiond/sessiond.sock,
// /tmp/sessiond-$UID/sessiond.sock.
func (l Layout) SocketPath(flag string, getenv Getenv) string {
	if flag != "" {
		return flag
	}
	if v := getenv("SESSIOND_SOCKET"); v != "" {
		return v
	}
	if v := getenv("XDG_RUNTIME_DIR"); v != "" {
		return filepath.Join(v, "sessiond", "sessiond.sock")
	}
	if l.TempEnv != "" {
		if v := getenv(l.TempEnv); v != "" {
			return filepath.Join(v, "sessiond", "sessiond.sock")
		}
	}
	return filepath.Join("/tmp", "sessiond-"+strconv.Itoa(os.Getuid()), "sessiond.sock")
}
