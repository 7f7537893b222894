package service

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/tty"
)

// Install (`sessiond install-service`) copies this binary to a stable
// place (--binary, default ~/.local/bin/sessiond; never inside a git work
// tree), writes the platform's service files (nativeService: the systemd
// user units on Linux, the launchd agent on macOS) naming that copy, and
// prints the commands to run next. A file that exists with other content
// (the binary included) is never replaced without --force; identical
// content is left alone. Nothing is written when any file would be refused.
func Install(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("install-service", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dryRun := fs.Bool("dry-run", false, "print what would be written; write nothing")
	force := fs.Bool("force", false, "replace units (and a binary) that differ from what would be written")
	binary := fs.String("binary", "", "where to install this binary for the service to run (default ~/.local/bin/sessiond)")
	if err := fs.Parse(args); err != nil {
		return exitcode.Usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessiond install-service: unexpected argument %q\n", tty.Safe(prefixOf(fs.Arg(0))))
		return exitcode.Usage
	}
	svc := nativeService
	fail := func(err error) int {
		fmt.Fprintln(stderr, "sessiond install-service:", tty.Safe(err.Error()))
		return exitcode.Error
	}
	dir, err := svc.dir(os.Getenv)
	if err != nil {
		return fail(err)
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return fail(fmt.Errorf("cannot find this binary's path: %w", err))
	}
	to := *binary
	if to == "" {
		if to, err = defaultBinary(); err != nil {
			return fail(err)
		}
	} else if to, err = filepath.Abs(to); err != nil {
		return fail(err)
	}
	bin, err := planBinary(exe, to)
	if err != nil {
		return fail(err)
	}
	for _, d := range []struct{ what, dir string }{{"binary dir", filepath.Dir(bin.to)}, {"unit dir", dir}} {
		if err := creatable(d.what, d.dir); err != nil {
			return fail(err)
		}
	}
	plan, err := svc.plan(dir, bin.to)
	if err != nil {
		return fail(err)
	}
	if u := unitAt(plan, bin.to); u != "" {
		return fail(fmt.Errorf("--binary %s: that is where the unit %s is written (the unit would overwrite the binary); pass another path (the default ~/.local/bin/sessiond)", bin.to, u))
	}
	refused := false
	if bin.state == unitChanged && !*force {
		refused = true
		fmt.Fprintf(stderr, "sessiond install-service: %s\n", tty.Safe(bin.refusal()))
	}
	for _, u := range plan {
		if u.state == unitChanged && !*force {
			refused = true
			fmt.Fprintf(stderr, "sessiond install-service: %s; not replaced (--force replaces it)\n", tty.Safe(u.differs()))
		}
	}
	if refused && !*dryRun {
		return exitcode.Error
	}
	switch {
	case *dryRun:
		fmt.Fprintf(stdout, "# binary %s: %s (from %s)\n", tty.Safe(bin.to), bin.state.verb(true, *force), tty.Safe(exe))
	case bin.state == unitSame:
		fmt.Fprintf(stdout, "unchanged %s\n", tty.Safe(bin.to))
	default:
		st, err := bin.install(*force)
		if err != nil {
			return fail(err)
		}
		if st == unitSame {
			fmt.Fprintf(stdout, "unchanged %s\n", tty.Safe(bin.to))
		} else {
			fmt.Fprintf(stdout, "%s %s (from %s)\n", st.verb(false, *force), tty.Safe(bin.to), tty.Safe(exe))
		}
	}
	for _, u := range plan {
		switch {
		case *dryRun:
			fmt.Fprintf(stdout, "# %s %s\n%s\n", u.state.verb(true, *force), tty.Safe(u.path), u.text)
		case u.state == unitSame:
			fmt.Fprintf(stdout, "unchanged %s\n", tty.Safe(u.path))
		default:
			// A unit absent at the plan is not replaced if another
			// install wrote one since: that one is compared again.
			err := writeUnit(u.path, u.text, u.state == unitNew && !*force)
			if errors.Is(err, errUnitAppeared) {
				again, perr := planFile(u.path, u.text)
				switch {
				case perr != nil:
					err = perr
				case again.state == unitSame:
					fmt.Fprintf(stdout, "unchanged %s\n", tty.Safe(u.path))
					continue
				default:
					err = fmt.Errorf("%s; not replaced (--force replaces it) (it appeared while this install ran: another install-service?)", again.differs())
				}
			}
			if err != nil {
				return fail(err)
			}
			fmt.Fprintf(stdout, "%s %s\n", u.state.verb(false, *force), tty.Safe(u.path))
		}
	}
	fmt.Fprint(stdout, "then run:\n"+svc.next(dir))
	if refused {
		return exitcode.Error
	}
	return exitcode.OK
}

// serviceKind is how a platform runs sessiond as a per-user service.
type serviceKind struct {
	dir  func(getenv func(string) string) (string, error) // where the files go
	plan func(dir, exe string) ([]unitPlan, error)        // what would be written
	next func(dir string) string                          // the commands to run then
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
	link       string // what the path links to, when it is a symlink
}

// differs says how a changed unit differs: a symlink (to /dev/null: the
// unit is masked) or other text.
func (u unitPlan) differs() string {
	switch {
	case u.link == os.DevNull:
		name := filepath.Base(u.path)
		return fmt.Sprintf("%s is masked (a symlink to %s; `systemctl --user unmask %s` undoes it)", u.path, os.DevNull, name)
	case u.link != "":
		return fmt.Sprintf("%s is a symlink to %s, whose text differs from what would be written", u.path, u.link)
	default:
		return u.path + " differs from what would be written"
	}
}

// planFile compares the text to write at path with what is on disk.
func planFile(path, text string) (unitPlan, error) {
	u := unitPlan{path: path, text: text}
	old, err := os.ReadFile(u.path)
	fi, lerr := os.Lstat(u.path) // a dangling symlink is an entry of someone's too
	if lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		u.link, _ = os.Readlink(u.path)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) && errors.Is(lerr, fs.ErrNotExist):
		u.state = unitNew
	case errors.Is(err, fs.ErrNotExist):
		u.state = unitChanged
	case err != nil:
		return u, fmt.Errorf("%s: %w", u.path, err)
	case bytes.Equal(old, []byte(text)):
		u.state = unitSame
	default:
		u.state = unitChanged
	}
	return u, nil
}

// errUnitAppeared: writeUnit's noReplace rename found a unit there.
var errUnitAppeared = errors.New("a unit is there now")

// writeUnit writes through a temporary file and a rename, so systemd never
// reads half a unit; noReplace: a rename that fails (errUnitAppeared, not
// any other EEXIST such as the directory's) when path exists.
func writeUnit(path, text string, noReplace bool) error {
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
	rename := os.Rename
	if noReplace {
		rename = renameNoReplace
	}
	if err := rename(tmp.Name(), path); err != nil {
		if noReplace && errors.Is(err, fs.ErrExist) {
			err = errUnitAppeared
		}
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
