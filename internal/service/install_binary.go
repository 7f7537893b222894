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
	dir := filepath.Dir(path)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			dir = filepath.Join(r, rest)
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
	for d := dir; ; d = filepath.Dir(d) {
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
// service running the old file keeps it), mode 0755.
func (p binaryPlan) install() error {
	b, err := os.ReadFile(p.from)
	if err != nil {
		return fmt.Errorf("this binary %s: %w", p.from, err)
	}
	dir := filepath.Dir(p.to)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("binary dir %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p.to)+".*")
	if err != nil {
		return fmt.Errorf("binary %s: %w", p.to, err)
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
	if err == nil {
		err = os.Rename(tmp.Name(), p.to)
	}
	if err != nil {
		return fmt.Errorf("binary %s: %w", p.to, err)
	}
	return nil
}
