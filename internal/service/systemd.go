package service

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	systemdunits "github.com/sessiond/sessiond/contrib/systemd"
	"github.com/sessiond/sessiond/internal/tty"
)

// systemdService: the user units of contrib/systemd under
// $XDG_CONFIG_HOME/systemd/user, ExecStart naming the binary.
var systemdService = serviceKind{
	dir:  unitDir,
	plan: planUnits,
	next: func(string) string {
		return "  systemctl --user daemon-reload\n  systemctl --user enable --now sessiond.socket\n"
	},
}

// unitDir is $XDG_CONFIG_HOME/systemd/user, else ~/.config/systemd/user.
func unitDir(getenv func(string) string) (string, error) {
	if v := getenv("XDG_CONFIG_HOME"); v != "" {
		if !filepath.IsAbs(v) {
			return "", fmt.Errorf("XDG_CONFIG_HOME=%q is not an absolute path", prefixOf(v))
		}
		return filepath.Join(v, "systemd", "user"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no XDG_CONFIG_HOME and no home directory: %w", err)
	}
	return filepath.Join(home, ".config", "systemd", "user"), nil
}

// planUnits renders every unit for exe and compares it with what is on disk.
func planUnits(dir, exe string) ([]unitPlan, error) {
	var plan []unitPlan
	for _, name := range systemdunits.Names {
		tmpl, err := systemdunits.Files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("unit %s: %w", name, err)
		}
		text, err := renderUnit(string(tmpl), exe)
		if err != nil {
			return nil, err
		}
		u, err := planFile(filepath.Join(dir, name), text)
		if err != nil {
			return nil, fmt.Errorf("unit %w", err)
		}
		plan = append(plan, u)
	}
	return plan, nil
}

// renderUnit replaces the template binary on ExecStart lines by exe,
// quoted for systemd.
func renderUnit(tmpl, exe string) (string, error) {
	q, err := execQuote(exe)
	if err != nil {
		return "", err
	}
	lines := strings.SplitAfter(tmpl, "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "ExecStart="+systemdunits.TemplateBinary+" "); ok {
			lines[i] = "ExecStart=" + q + " " + rest
		}
	}
	return strings.Join(lines, ""), nil
}

// execQuote writes path as one ExecStart word: % doubled (systemd
// specifiers), quoted when it holds a blank or ';'. The executable word is
// not expanded for $ (so $ stays as it is), and systemd refuses an
// executable name holding \ " or ' — as this does, before writing.
func execQuote(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("binary path %q is not absolute", prefixOf(path))
	}
	for _, r := range path {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("binary path %s holds a control character; systemd cannot run it", tty.Safe(prefixOf(path)))
		}
	}
	if strings.ContainsAny(path, "\"'\\") {
		return "", fmt.Errorf("binary path %s holds a quote or a backslash; systemd cannot run it: install sessiond under another path", tty.Safe(prefixOf(path)))
	}
	s := strings.ReplaceAll(path, "%", "%%")
	if !strings.ContainsAny(s, " ;") {
		return s, nil
	}
	return `"` + s + `"`, nil
}
