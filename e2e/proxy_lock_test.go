package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/exitcode"
)

// TestE2EProxyStartLockHeld: a start lock another process holds for good
// (a hung starter, a hostile process of the same user) does not hang the
// front doors behind it: with no daemon accepting, `sessiond proxy` gives
// up after its bound, exits 3 and names the lock. (Before: it waited on
// the flock forever.)
func TestE2EProxyStartLockHeld(t *testing.T) {
	sock := filepath.Join(shortDir(t), "s.sock")
	state := t.TempDir()
	lf, err := os.OpenFile(filepath.Join(state, "proxy-start.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, "--socket", sock, "--state-dir", state)
	p.stdin.Close()
	done := make(chan int, 1)
	go func() {
		_, code := p.wait(t)
		done <- code
	}()
	select {
	case code := <-done:
		if code != exitcode.NoDaemon || !strings.Contains(p.stderr.String(), "start lock") {
			t.Fatalf("exit %d, want 3 naming the lock: %s", code, p.stderr.String())
		}
	case <-time.After(90 * time.Second):
		p.cmd.Process.Kill()
		<-done // its Wait returns before the cleanup's
		t.Fatal("sessiond proxy still waits for a start lock held by another process after 90 s")
	}
	if _, err := os.Stat(filepath.Join(state, "sessiond.db")); err == nil {
		t.Fatal("a daemon was started without the start lock")
	}
}
