package service

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// errInWorkTree: the service's binary would live inside a git work tree,
// where a rebuild, a checkout or `git clean` changes or removes it under
// the running service.
var errInWorkTree = errors.New("inside a git work tree")

// binaryPlan is what install-service does with the binary the units run:
// copy the running one (from) to a stable path (to).
type binaryPlan struct {
	from, to string
	state    unitState // unitNew: to is absent; unitSame: to is from or has its bytes
	link     string    // what to links to, when it is a symlink (then unitChanged)
}

// defaultBinary is where install-service puts the binary without
// --binary: ~/.local/bin/sessiond.
func defaultBinary() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory for the default ~/.local/bin/sessiond (pass --binary PATH): %w", err)
	}
	return filepath.Join(home, ".local", "bin", "sessiond"), nil
}

// gitWorkTree is the nearest directory above path holding a .git entry
// (a directory, or the file of a linked worktree or submodule), "" if
// none. Symlinks in the part of path that exists are resolved first.
func gitWorkTree(path string) string {
	for d := filepath.Dir(resolvedPath(path)); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// planBinary checks to (absolute, outside any git work tree) and compares
// it with from.
func planBinary(from, to string) (binaryPlan, error) {
	p := binaryPlan{from: from, to: to}
	if !filepath.IsAbs(to) {
		return p, fmt.Errorf("--binary %s: not an absolute path", to)
	}
	if wt := gitWorkTree(to); wt != "" {
		return p, fmt.Errorf("--binary %s: %w (%s): a rebuild, checkout or `git clean` there would change or remove what the service runs; install it to a stable place outside the work tree (the default ~/.local/bin/sessiond, or --binary PATH)",
			to, errInWorkTree, wt)
	}
	if fi, err := os.Lstat(to); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// The service would run whatever the link comes to point at (a
		// checkout's bin/sessiond, rebuilt under it): never "unchanged",
		// even when its target is this very binary.
		p.link, _ = os.Readlink(to)
		p.state = unitChanged
		return p, nil
	}
	dst, err := os.Stat(to)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.state = unitNew
		return p, nil
	case err != nil:
		return p, fmt.Errorf("--binary %s: %w", to, err)
	case !dst.Mode().IsRegular():
		return p, fmt.Errorf("--binary %s: not a regular file", to)
	}
	src, err := os.Stat(from)
	if err != nil {
		return p, fmt.Errorf("this binary %s: %w", from, err)
	}
	if os.SameFile(src, dst) {
		p.state = unitSame
		return p, nil
	}
	a, err := os.ReadFile(from)
	if err != nil {
		return p, fmt.Errorf("this binary %s: %w", from, err)
	}
	b, err := os.ReadFile(to)
	if err != nil {
		return p, fmt.Errorf("--binary %s: %w", to, err)
	}
	p.state = unitChanged
	if bytes.Equal(a, b) {
		p.state = unitSame
	}
	return p, nil
}

// install copies from to to through a temporary file and a rename (a
// service running the old file keeps it), mode 0755, and says what it
// did: unitNew (written), unitChanged (replaced) or unitSame. When to was
// absent at the plan, the rename does not replace a file that appeared
// since (another install-service racing this one, without --force): that
// file is compared again, unitSame for this binary's bytes, else refused
// as at the plan.
func (p binaryPlan) install(force bool) (unitState, error) {
	b, err := os.ReadFile(p.from)
	if err != nil {
		return p.state, fmt.Errorf("this binary %s: %w", p.from, err)
	}
	dir := filepath.Dir(p.to)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return p.state, fmt.Errorf("binary dir %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p.to)+".*")
	if err != nil {
		return p.state, fmt.Errorf("binary %s: %w", p.to, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
	case p.state == unitNew && !force:
		err = renameNoReplace(tmp.Name(), p.to)
		if errors.Is(err, fs.ErrExist) {
			again, perr := planBinary(p.from, p.to)
			switch {
			case perr != nil:
				return p.state, perr
			case again.state == unitSame:
				return unitSame, nil
			}
			return p.state, fmt.Errorf("%s (it appeared while this install ran: another install-service?)", again.refusal())
		}
	default:
		err = os.Rename(tmp.Name(), p.to)
	}
	if err != nil {
		return p.state, fmt.Errorf("binary %s: %w", p.to, err)
	}
	return p.state, nil
}

// refusal says why an existing binary at p.to is not replaced without
// --force.
func (p binaryPlan) refusal() string {
	if p.link == "" {
		return fmt.Sprintf("%s differs from this binary (%s); not replaced (--force replaces it)", p.to, p.from)
	}
	where := ""
	if target, err := filepath.EvalSymlinks(p.to); err == nil {
		if wt := gitWorkTree(target); wt != "" {
			where = fmt.Sprintf(", %s (%s)", errInWorkTree, wt)
		}
	}
	return fmt.Sprintf("%s is a symlink to %s%s: the service would run whatever that comes to be, not a copy; not replaced (--force replaces the link with a copy of this binary, leaving %s as it is)",
		p.to, p.link, where, p.link)
}

// unitAt is the unit of plan that path names (the same file, or the same
// name in the same directory once symlinks are resolved), "" if none: the
// binary must not be written where a unit goes, nor a unit over it.
func unitAt(plan []unitPlan, path string) string {
	for _, u := range plan {
		if resolvedPath(u.path) == resolvedPath(path) {
			return u.path
		}
		a, errA := os.Stat(u.path)
		b, errB := os.Stat(path)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return u.path
		}
	}
	return ""
}

// resolvedPath is path with the symlinks in the part of its directory
// that exists resolved.
func resolvedPath(path string) string {
	dir, rest := filepath.Dir(filepath.Clean(path)), filepath.Base(path)
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Join(dir, rest)
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// creatable checks that dir is a directory or can be made one: the
// nearest part of it that exists must be a directory (through a symlink
// too). A dangling symlink on the way, or a file, is refused naming it,
// so that --dry-run says what the real run would meet and the real run
// writes nothing before it meets it.
func creatable(what, dir string) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if filepath.Dir(d) == d {
				return nil
			}
			continue
		case err != nil:
			return fmt.Errorf("%s %s: %w", what, dir, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			st, serr := os.Stat(d)
			if serr != nil {
				link, _ := os.Readlink(d)
				return fmt.Errorf("%s %s: %s is a symlink to %s, which does not exist (%w): create that directory or remove the link", what, dir, d, link, serr)
			}
			fi = st
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s %s: %s is not a directory", what, dir, d)
		}
		return nil
	}
}
