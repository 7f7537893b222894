package config

import (
	"errors"
	"os"
	"path/filepath"
)

// ErrNoHome: neither $XDG_STATE_HOME nor a home directory is known.
var ErrNoHome = errors.New("cannot resolve a state directory: set --state-dir, $SESSIOND_STATE_DIR or $HOME")

// Getenv is how paths read the environment (os.Getenv in production).
type Getenv func(string) string

// ConfigPath resolves the config file: --config, $SESSIOND_CONFIG,
// $XDG_CONFIG_HOME/sessiond/config.toml, ~/.config/sessiond/config.toml.
// explicit is true for the first two (a missing file is then an error).
func ConfigPath(flag string, getenv Getenv) (path string, explicit bool) {
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
		return filepath.Join(h, ".config", "sessiond", "config.toml"), false
	}
	return "", false
}

// StateDir resolves the state directory: --state-dir, $SESSIOND_STATE_DIR,
// $XDG_STATE_HOME/sessiond, ~/.local/state/sessiond. The result is absolute.
func StateDir(flag string, getenv Getenv) (string, error) {
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
		dir = filepath.Join(h, ".local", "state", "sessiond")
	}
	return filepath.Abs(dir)
}
