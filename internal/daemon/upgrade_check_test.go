package daemon

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fakeBinary is an executable shell script standing in for a new binary.
func fakeBinary(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sessiond")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckBinaryRunsItOnce: a binary whose `version --handoff` says its
// version is not run a second time (here `version` would fail: the check
// passes only if it is not asked); its formats and features are told
// apart. A binary without the line is asked `version`.
func TestCheckBinaryRunsItOnce(t *testing.T) {
	once := fakeBinary(t, `case "$1 $2" in
"version --handoff") printf 'sessiond-handoff/1\nsessiond-handoff/2\nsessiond-handoff+inotify\nversion v9.1.0\n';;
*) exit 1;;
esac`)
	nb, err := checkBinary(context.Background(), once)
	if err != nil {
		t.Fatalf("checkBinary: %v (a second run, of `version`, fails here)", err)
	}
	if nb.version != "v9.1.0" || !slices.Equal(nb.formats, []string{handoffFormat, handoffFormatRuntimes}) ||
		!slices.Equal(nb.features, []string{handoffInotify}) {
		t.Fatalf("checkBinary = %+v", nb)
	}
	older := fakeBinary(t, `case "$1 $2" in
"version --handoff") printf 'sessiond-handoff/1\n';;
"version ") echo 'sessiond v8.0.0';;
*) exit 1;;
esac`)
	nb, err = checkBinary(context.Background(), older)
	if err != nil {
		t.Fatal(err)
	}
	if nb.version != "v8.0.0" || len(nb.features) != 0 {
		t.Fatalf("checkBinary(older) = %+v", nb)
	}
}
