package proc

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

var reaper struct {
	sync.Mutex
	running bool
	reaped  atomic.Uint64
}

// OrphansReaped counts adopted orphans the subreaper has reaped.
func OrphansReaped() uint64 { return reaper.reaped.Load() }

// SetSubreaper makes the daemon a child subreaper (orphaned descendants are
// reparented to it, so detached ones stay visible) and starts a reaper of
// adopted orphans: on SIGCHLD it reaps only zombie children that were not
// started through Spawn (a generic wait4(-1) would steal exec.Cmd's status).
// Every child of the daemon must therefore be started through Spawn: an
// exec.Cmd started elsewhere would lose its exit status to this reaper.
// stop ends the reaper goroutine; the process stays a subreaper.
func SetSubreaper(log *slog.Logger) (stop func(), err error) {
	log = orDiscard(log)
	reaper.Lock()
	defer reaper.Unlock()
	if reaper.running {
		return nil, ErrReaperRunning
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("%w: prctl(PR_SET_CHILD_SUBREAPER): %w", ErrUnsupported, err)
	}
	reaper.running = true
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		reapOrphans(log)
		for {
			select {
			case <-sigs:
				reapOrphans(log)
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(quit)
			<-done
			reaper.Lock()
			reaper.running = false
			reaper.Unlock()
		})
	}, nil
}

// reapOrphans reaps zombie children that Spawn did not start. The registry
// lock is held throughout so a child being spawned cannot be mistaken for
// an orphan.
func reapOrphans(log *slog.Logger) {
	registry.Lock()
	defer registry.Unlock()
	r, err := newStatReader()
	if err != nil {
		return
	}
	defer r.close()
	for _, pid := range ourChildren(r) {
		if _, ours := registry.pids[pid]; ours {
			continue
		}
		st, err := r.read(pid)
		if err != nil || !st.zombie() {
			continue
		}
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != nil || got != pid {
			continue
		}
		reaper.reaped.Add(1)
		attrs := []any{"pid", pid}
		if ws.Signaled() {
			attrs = append(attrs, "signal", signalName(ws.Signal()))
		} else {
			attrs = append(attrs, "code", ws.ExitStatus())
		}
		log.Info("reaped orphan", attrs...)
	}
}

// ourChildren lists our children from /proc/self/task/*/children, or by a
// ppid scan of /proc where that file is missing.
func ourChildren(r *statReader) []int {
	// Each thread's children file (CONFIG_PROC_CHILDREN), read by name:
	// a glob of them would lstat each first, on every SIGCHLD.
	tasks, _ := os.ReadDir("/proc/self/task")
	var pids []int
	read := false
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		read = true
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if read {
		return pids
	}
	all, err := listPIDs()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	for _, pid := range all {
		if st, err := r.read(pid); err == nil && st.PPID == self {
			pids = append(pids, pid)
		}
	}
	return pids
}
