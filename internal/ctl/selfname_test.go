package ctl

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSelfName: "sessiond" when PATH's sessiond is this file (a symlink to
// it included) or the executable is unknown; else the path, shell-quoted.
func TestSelfName(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "my bin", "sessiond")
	os.Mkdir(filepath.Dir(exe), 0o755)
	copyFile(t, os.Args[0], exe)
	link := filepath.Join(dir, "sessiond")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	copyFile(t, os.Args[0], other)
	is := func(p string) func() (string, error) { return func() (string, error) { return p, nil } }
	look := func(p string, err error) func(string) (string, error) {
		return func(string) (string, error) { return p, err }
	}
	tests := []struct {
		name string
		exe  func() (string, error)
		look func(string) (string, error)
		want string
	}{
		{"on PATH via a symlink", is(exe), look(link, nil), "sessiond"},
		{"PATH finds another file", is(exe), look(other, nil), "'" + exe + "'"},
		{"not on PATH", is(exe), look("", exec.ErrNotFound), "'" + exe + "'"},
		{"executable unknown", func() (string, error) { return "", os.ErrNotExist }, look(link, nil), "sessiond"},
	}
	for _, tc := range tests {
		if got := selfName(tc.exe, tc.look); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
}
