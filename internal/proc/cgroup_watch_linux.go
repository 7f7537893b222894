package proc

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watcher is the daemon's one inotify instance on cgroup event files
// (cgroup.events, memory.events, pids.events). The kernel notifies a
// modification of them; one goroutine reads the notifications, parked in
// the runtime's poller in between: no ticker, no scan.
type watcher struct {
	f    *os.File
	fd   int
	mu   sync.Mutex // guards cbs
	cbs  map[int32]func()
	done chan struct{}
}

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, cbs: map[int32]func(){}, done: make(chan struct{})}
	go w.loop()
	return w, nil
}

// adoptWatcher wraps the inotify instance a live upgrade's previous image
// handed over (inherited without close-on-exec). Its watches are kept: an
// add of a path it already watches answers that watch's descriptor, and
// notifications queued while no image read them are read now (each
// callback re-reads its file, so a stale one is harmless). A descriptor
// that is not an inotify instance is refused and left alone.
func adoptWatcher(fd int) (*watcher, error) {
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || link != "anon_inode:inotify" {
		return nil, fmt.Errorf("descriptor %d is not an inotify instance (%q, %v)", fd, link, err)
	}
	syscall.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("descriptor %d: %w", fd, err)
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, cbs: map[int32]func(){}, done: make(chan struct{})}
	go w.loop()
	return w, nil
}

// add calls cb on every modification of path (from the watcher's goroutine).
func (w *watcher) add(path string, cb func()) (int32, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wd, err := unix.InotifyAddWatch(w.fd, path, unix.IN_MODIFY)
	if err != nil {
		return 0, err
	}
	w.cbs[int32(wd)] = cb
	return int32(wd), nil
}

// remove stops calling the watch's callback.
func (w *watcher) remove(wd int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.cbs[wd]; ok {
		delete(w.cbs, wd)
		unix.InotifyRmWatch(w.fd, uint32(wd)) // EINVAL once the file is gone: nothing to undo
	}
}

func (w *watcher) loop() {
	defer close(w.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			// closed (Close), or nothing more can be learned: every wait on
			// this watcher falls back to its own timeout
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.mu.Lock()
			cb := w.cbs[ev.Wd]
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(w.cbs, ev.Wd)
				cb = nil
			}
			w.mu.Unlock()
			if cb != nil {
				cb()
			}
		}
	}
}

func (w *watcher) close() {
	w.f.Close()
	<-w.done
}
