package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/internal/exitcode"
)

// readOnly makes dir read-only for this process: a read-only bind mount
// of it onto itself as root (root ignores modes), mode 0500 otherwise.
func readOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		return
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount %s: %v", dir, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
}

// TestE2EReadOnlyStateDir: a sound store in a state dir serve cannot
// write is refused with exit 1 and the fix, and doctor reports it as a
// problem (it used to print 0 problems for a daemon that cannot start).
func TestE2EReadOnlyStateDir(t *testing.T) {
	dir := usedStateDir(t)
	readOnly(t, dir)
	const fix = "make it writable"
	code, out := runDaemonExpectExit(t, "--socket", filepath.Join(t.TempDir(), "run", "s.sock"), "--state-dir", dir)
	if code != exitcode.Error || !strings.Contains(out, fix) || !strings.Contains(out, dir) {
		t.Fatalf("serve on a read-only state dir: exit %d, want 1 naming %s and %q:\n%s", code, dir, fix, out)
	}
	code, stdout, stderr := runCtl(t, filepath.Join(t.TempDir(), "none.sock"), t.TempDir(), "doctor", "--state-dir", dir)
	if code != exitcode.Error || !strings.Contains(stdout, "not writable") || !strings.Contains(stdout, fix) {
		t.Fatalf("doctor on a read-only state dir: exit %d, want 1 with the problem and %q:\n%s%s", code, fix, stdout, stderr)
	}
}
