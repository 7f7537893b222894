package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	systemdunits "github.com/sessiond/sessiond/contrib/systemd"
)

// installService writes the systemd user units (contrib/systemd, embedded)
// under $XDG_CONFIG_HOME/systemd/user with ExecStart naming this binary,
// and prints the systemctl lines to run. A unit that exists with other
// content is never replaced without --force; identical content is left
// alone. Nothing is written when any unit would be refused.
func installService(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("install-service", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dryRun := fs.Bool("dry-run", false, "print what would be written; write nothing")
	force := fs.Bool("force", false, "replace units that differ from what would be written")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessiond install-service: unexpected argument %q\n", termSafe(prefixOf(fs.Arg(0))))
		return exitUsage
	}
	dir, err := unitDir(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "sessiond install-service:", err)
		return exitError
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sessiond install-service: cannot find this binary's path:", err)
		return exitError
	}
	plan, err := planUnits(dir, exe)
	if err != nil {
		fmt.Fprintln(stderr, "sessiond install-service:", err)
		return exitError
	}
	refused := false
	for _, u := range plan {
		if u.state == unitChanged && !*force {
			refused = true
			fmt.Fprintf(stderr, "sessiond install-service: %s differs from what would be written; not replaced (--force replaces it)\n",
				termSafe(u.path))
		}
	}
	if refused && !*dryRun {
		return exitError
	}
	for _, u := range plan {
		switch {
		case *dryRun:
			fmt.Fprintf(stdout, "# %s %s\n%s\n", u.state.verb(true, *force), termSafe(u.path), u.text)
		case u.state == unitSame:
			fmt.Fprintf(stdout, "unchanged %s\n", termSafe(u.path))
		default:
			if err := writeUnit(u.path, u.text); err != nil {
				fmt.Fprintln(stderr, "sessiond install-service:", err)
				return exitError
			}
			fmt.Fprintf(stdout, "%s %s\n", u.state.verb(false, *force), termSafe(u.path))
		}
	}
	fmt.Fprint(stdout, "then run:\n  systemctl --user daemon-reload\n  systemctl --user enable --now sessiond.socket\n")
	if refused {
		return exitError
	}
	return exitOK
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

type unitState int

const (
	unitNew unitState = iota
	unitSame
	unitChanged
)

// verb says what happens to a unit in this state.
func (s unitState) verb(dry, force bool) string {
	switch {
	case s == unitNew && dry:
		return "would write"
	case s == unitNew:
		return "wrote"
	case s == unitSame:
		return "unchanged"
	case force && dry:
		return "differs: would replace"
	case force:
		return "replaced"
	default:
		return "differs: would refuse without --force"
	}
}

type unitPlan struct {
	path, text string
	state      unitState
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
		u := unitPlan{path: filepath.Join(dir, name), text: text}
		old, err := os.ReadFile(u.path)
		_, lerr := os.Lstat(u.path) // a dangling symlink is an entry of someone's too
		switch {
		case errors.Is(err, fs.ErrNotExist) && errors.Is(lerr, fs.ErrNotExist):
			u.state = unitNew
		case errors.Is(err, fs.ErrNotExist):
			u.state = unitChanged
		case err != nil:
			return nil, fmt.Errorf("unit %s: %w", u.path, err)
		case bytes.Equal(old, []byte(text)):
			u.state = unitSame
		default:
			u.state = unitChanged
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
			return "", fmt.Errorf("binary path %s holds a control character; systemd cannot run it", termSafe(prefixOf(path)))
		}
	}
	if strings.ContainsAny(path, "\"'\\") {
		return "", fmt.Errorf("binary path %s holds a quote or a backslash; systemd cannot run it: install sessiond under another path", termSafe(prefixOf(path)))
	}
	s := strings.ReplaceAll(path, "%", "%%")
	if !strings.ContainsAny(s, " ;") {
		return s, nil
	}
	return `"` + s + `"`, nil
}

// writeUnit writes through a temporary file and a rename, so systemd never
// reads half a unit.
func writeUnit(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("unit dir %s: %w", filepath.Dir(path), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("unit %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return fmt.Errorf("unit %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("unit %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("unit %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("unit %s: %w", path, err)
	}
	return nil
}

// prefixOf is at most 64 bytes of a bad value, for an error message.
func prefixOf(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}
