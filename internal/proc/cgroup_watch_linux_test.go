package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAdoptWatcherKeepsWatches: an inotify instance handed over through
// a live upgrade (here a dup without close-on-exec, as the exec leaves
// it) is reused as is: adding a path it already watches answers the same
// watch, a modification reaches the new callback, and the adopted
// descriptor is close-on-exec again (no child inherits it).
func TestAdoptWatcherKeepsWatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cgroup.events")
	if err := os.WriteFile(path, []byte("populated 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := newWatcher()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := old.add(path, func() {})
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Dup(old.fd) // dup clears close-on-exec: the handed-over descriptor
	if err != nil {
		t.Fatal(err)
	}
	old.close() // the old image is gone; the instance lives on in fd
	w, err := adoptWatcher(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("adopted descriptor flags %#x (%v): not close-on-exec", flags, err)
	}
	fired := make(chan struct{}, 16)
	again, err := w.add(path, func() { fired <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	if again != wd {
		t.Fatalf("the adopted instance answered watch %d for a path it watched as %d: a new instance, not the old one", again, wd)
	}
	if err := os.WriteFile(path, []byte("populated 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("a modification was not notified through the adopted instance")
	}
}

// TestAdoptWatcherRefusesOtherDescriptors: a handed-over number that is
// not an inotify instance (a pipe) is refused, naming it, and left open.
func TestAdoptWatcherRefusesOtherDescriptors(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	_, err = adoptWatcher(int(r.Fd()))
	if err == nil || !strings.Contains(err.Error(), "not an inotify instance") {
		t.Fatalf("adoptWatcher(pipe) = %v, want a refusal", err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatalf("the refused descriptor was closed: %v", err)
	}
}
