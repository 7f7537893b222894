package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2ECopiedStateDir: a daemon started on a copy (cp -a) of the state
// dir of a running daemon (same state id) refuses to start, naming the
// original, and the first daemon's provider keeps running; once the
// original is stopped, the copy starts (a move or restore) and says so.
func TestE2ECopiedStateDir(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	s := openCgSession(t, d, "echo")
	s.turn(t, "hello")
	cp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", d.StateDir, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	sockDir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	code, out := runDaemonExpectExit(t, "--socket", filepath.Join(sockDir, "s.sock"), "--state-dir", cp)
	if code == 0 || !strings.Contains(out, "copy of one a running sessiond uses") || !strings.Contains(out, d.StateDir) {
		t.Fatalf("a daemon on a copy of a state dir in use: exit %d, output:\n%s", code, out)
	}
	if got := s.turn(t, "still there"); !strings.Contains(got, "still there") {
		t.Fatalf("the first daemon's session answers %q", got)
	}
	d.Stop()
	d2 := daemontest.Start(t, daemontest.Options{StateDir: cp})
	waitLog(t, d2, "moved or copied from "+d.StateDir)
}
