package service

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallBinaryRace: the window between install-service's plan (the
// binary path absent) and its rename, where another install-service puts
// its own binary there: the rename does not replace it; a file of other
// bytes is refused naming the race and left as it is, one of this
// binary's bytes is unchanged; --force replaces it. No temporary file is
// left in any case.
func TestInstallBinaryRace(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "this")
	os.WriteFile(from, []byte("this binary"), 0o755)
	for _, tc := range []struct {
		name, other string
		force       bool
		want        unitState
		wantErr     string
		left        string
	}{
		{"other bytes", "another binary", false, 0, "appeared while this install ran", "another binary"},
		{"same bytes", "this binary", false, unitSame, "", "this binary"},
		{"--force", "another binary", true, unitNew, "", "this binary"},
	} {
		to := filepath.Join(t.TempDir(), "bin", "sessiond")
		p, err := planBinary(from, to)
		if err != nil || p.state != unitNew {
			t.Fatalf("%s: plan %v %v", tc.name, p.state, err)
		}
		os.MkdirAll(filepath.Dir(to), 0o755)
		os.WriteFile(to, []byte(tc.other), 0o755) // the other install wins the window
		st, err := p.install(tc.force)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "differs from this binary")):
			t.Errorf("%s: install: %v %v, want an error saying %q", tc.name, st, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || st != tc.want):
			t.Errorf("%s: install: %v %v, want %v", tc.name, st, err, tc.want)
		}
		if b, _ := os.ReadFile(to); string(b) != tc.left {
			t.Errorf("%s: %s holds %q, want %q", tc.name, to, b, tc.left)
		}
		if es, _ := os.ReadDir(filepath.Dir(to)); len(es) != 1 {
			t.Errorf("%s: %d entries left in %s, want the binary alone", tc.name, len(es), filepath.Dir(to))
		}
	}
}

// TestRenameNoReplace: a rename (and the link fallback) onto an existing
// file fails with fs.ErrExist and leaves both files; onto a free name it
// moves the file. writeUnit with noReplace likewise (errUnitAppeared).
func TestRenameNoReplace(t *testing.T) {
	for name, rename := range map[string]func(string, string) error{"renameNoReplace": renameNoReplace, "linkNoReplace": linkNoReplace} {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.WriteFile(a, []byte("a"), 0o644)
		os.WriteFile(b, []byte("b"), 0o644)
		if err := rename(a, b); !errors.Is(err, fs.ErrExist) {
			t.Errorf("%s onto an existing file: %v, want fs.ErrExist", name, err)
		}
		if x, _ := os.ReadFile(a); string(x) != "a" {
			t.Errorf("%s: the source went: %q", name, x)
		}
		if x, _ := os.ReadFile(b); string(x) != "b" {
			t.Errorf("%s: the target was replaced: %q", name, x)
		}
		c := filepath.Join(dir, "c")
		if err := rename(a, c); err != nil {
			t.Errorf("%s onto a free name: %v", name, err)
		}
		if _, err := os.Lstat(a); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the source is still there: %v", name, err)
		}
		if x, _ := os.ReadFile(c); string(x) != "a" {
			t.Errorf("%s: moved file holds %q", name, x)
		}
	}
	unit := filepath.Join(t.TempDir(), "sessiond.service")
	os.WriteFile(unit, []byte("theirs"), 0o644)
	if err := writeUnit(unit, "ours", true); !errors.Is(err, errUnitAppeared) {
		t.Errorf("writeUnit noReplace over a unit: %v, want errUnitAppeared", err)
	}
	if x, _ := os.ReadFile(unit); string(x) != "theirs" {
		t.Errorf("writeUnit noReplace replaced the unit: %q", x)
	}
	if es, _ := os.ReadDir(filepath.Dir(unit)); len(es) != 1 {
		t.Errorf("writeUnit left %d entries, want the unit alone", len(es))
	}
	// Only the rename's EEXIST says a unit appeared: not the directory's
	// (a dangling symlink where it goes).
	dangling := filepath.Join(t.TempDir(), "units")
	os.Symlink(filepath.Join(filepath.Dir(dangling), "nowhere"), dangling)
	if err := writeUnit(filepath.Join(dangling, "sessiond.service"), "ours", true); err == nil || errors.Is(err, errUnitAppeared) {
		t.Errorf("writeUnit under a dangling directory link: %v, want an error that is not errUnitAppeared", err)
	}
}
