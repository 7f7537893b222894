package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/host"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/store"
	"github.com/sessiond/sessiond/internal/version"
)

// The new image's side of a live upgrade: read the handoff named by
// $SESSIOND_HANDOFF, adopt its sessions before anything could reap their
// children, serve on the inherited socket, and answer the caller of
// daemon.upgrade once accepting.

// takeHandoff reads the handoff the environment names, if any, and removes
// the variable (no child inherits it). A handoff is honoured only if it is
// a regular file (not a symlink, FIFO or device) in stateDir, owned by
// this user, and was written by this pid; anything else is ignored with a
// warning and left where it is. An honoured file that cannot be adopted
// is an error (the next start reaps as after a crash).
func takeHandoff(stateDir string, log *slog.Logger) (*handoff, error) {
	path, ok := os.LookupEnv(HandoffEnv)
	os.Unsetenv(HandoffEnv)
	// A plain start removes a leftover handoff only once it holds the
	// store's flock (serve: removeStaleHandoff): before that, the file
	// may be a live upgrade's, written a moment ago for the new image.
	if !ok || path == "" {
		return nil, nil
	}
	if why := foreignHandoff(stateDir, path); why != "" {
		log.Warn("ignoring "+HandoffEnv+": not a live upgrade of this daemon", "path", api.Prefix(path), "why", why)
		return nil, nil
	}
	h, err := readHandoff(path)
	if err != nil {
		return nil, err
	}
	closeOnExecInherited()
	syscall.CloseOnExec(h.Listener.FD) // inherited once, by us only
	if h.StoreFD > 2 {
		syscall.CloseOnExec(h.StoreFD)
	}
	if h.Caller != nil {
		syscall.CloseOnExec(h.Caller.FD)
	}
	if h.InotifyFD > 2 {
		syscall.CloseOnExec(h.InotifyFD) // openCgroups reuses or closes it
	} else {
		h.InotifyFD = 0
	}
	return h, nil
}

// removeStaleHandoff removes a handoff left in stateDir by a new image
// that died before reading it (a plain start adopts nothing): only a
// regular file of this user, never what a symlink points to. Called with
// the store's flock held: an image being exec'd to holds it (the
// inherited store descriptor), so this never removes a handoff in flight.
func removeStaleHandoff(stateDir string, log *slog.Logger) {
	path := filepath.Join(stateDir, HandoffFile)
	fi, err := os.Lstat(path)
	if err != nil {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || !ok || int(st.Uid) != os.Getuid() {
		log.Warn("a leftover live upgrade handoff is not a regular file of this user; left alone", "path", path)
		return
	}
	if err := os.Remove(path); err == nil {
		log.Info("removed a leftover live upgrade handoff (its new image died before reading it)", "path", path)
	}
}

// foreignHandoff says why path is not a handoff this process may adopt
// (nor delete), or "". It never opens anything but a regular file, and
// that without blocking.
func foreignHandoff(stateDir, path string) string {
	if filepath.Clean(filepath.Dir(path)) != filepath.Clean(stateDir) {
		return "not in the state directory " + stateDir
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err.Error()
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Sprintf("not a regular file (%v)", fi.Mode().Type())
	case !ok || int(st.Uid) != os.Getuid():
		return "not owned by this user"
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var h struct {
		PID int `json:"pid"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxHandoffBytes)).Decode(&h); err != nil {
		return "unreadable: " + err.Error()
	}
	if h.PID != os.Getpid() {
		return fmt.Sprintf("written by pid %d, this is %d", h.PID, os.Getpid())
	}
	return ""
}

// adoptHandoff adopts the handoff's sessions into h (before SetSubreaper:
// the reaper of orphans must never take an adopted child's status).
func (d *daemon) adoptHandoff(h *host.Host, stateID string) error {
	ho := d.handoff
	if ho.StateID != stateID {
		return fmt.Errorf("%w: written for state id %s, the store is %s", errHandoff, ho.StateID, stateID)
	}
	d.log.Info("adopting a live upgrade's sessions", "sessions", len(ho.Sessions), "from_version", ho.FromVersion,
		"to_version", version.String())
	start := time.Now()
	if err := h.Adopt(context.Background(), ho.Runtimes, ho.Sessions); err != nil {
		return err
	}
	d.log.Info("live upgrade's sessions adopted", "sessions", len(ho.Sessions), "runtimes", len(ho.Runtimes), "ms", msSince(start))
	return nil
}

// adoptGCLimit is the heap at which the collector runs while a new image
// adopts (it is otherwise held off: see holdGC).
const adoptGCLimit = 512 << 20

// holdGC holds the garbage collector off from the new image's start until
// it accepts (the returned func restores it): adopting a hundred sessions
// grows a fresh heap from 4 MB through three collections, each taking a
// core of the two for milliseconds while daemon.upgrade's caller waits. A
// heap past adoptGCLimit (a huge handoff) is still collected. No-op
// without a handoff.
func (d *daemon) holdGC() (restore func()) {
	if d.handoff == nil {
		return func() {}
	}
	pct, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(adoptGCLimit)
	return func() {
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(pct)
	}
}

// handoffListener is the listening socket inherited through the exec.
func (d *daemon) inheritedListener() (net.Listener, error) {
	lh := d.handoff.Listener
	d.handoff.Listener.FD = -1 // taken once: the number may be reused after
	f := os.NewFile(uintptr(lh.FD), "listener")
	if f == nil {
		return nil, fmt.Errorf("%w: listener descriptor %d", errHandoff, lh.FD)
	}
	defer f.Close() // FileListener holds a dup
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("%w: listener descriptor %d: %w", errHandoff, lh.FD, err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("%w: descriptor %d is not a unix listener", errHandoff, lh.FD)
	}
	ul.SetUnlinkOnClose(!lh.Activated) // our own socket is removed at shutdown, as before
	return ul, nil
}

// answerCaller answers daemon.upgrade on the connection that called it,
// off the daemon's path (a caller that stopped reading must not hold the
// new image; the write is bounded by write_timeout). The connection then
// stays open, served like any other, initialized with the capabilities
// it had: a client that disposes of its connection when it closes never
// sees a close right behind the answer. (A handoff from an image that
// did not mark the caller to be served on: answered, then closed.) The
// descriptor is used only if it is a connected unix stream socket;
// anything else is left alone. serve false (the new image is stopping):
// answered and closed. The channel is closed once the answer is written
// or cannot be.
func (d *daemon) answerCaller(srv *rpc.Server, serve bool) <-chan struct{} {
	done := make(chan struct{})
	c := d.handoff.Caller
	if c == nil {
		close(done)
		return done
	}
	d.handoff.Caller = nil // taken once
	conn, err := callerConn(c.FD)
	if err != nil {
		d.log.Warn("upgrade: the caller's descriptor is not answered", "fd", c.FD, "err", err.Error())
		close(done)
		return done
	}
	result := api.UpgradeResult{FromVersion: d.handoff.FromVersion, ToVersion: version.String(), PID: os.Getpid()}
	if c.Serve && serve {
		framing := rpc.FramingLines
		if strings.EqualFold(c.Framing, "header") {
			framing = rpc.FramingHeader
		}
		if err := srv.AdoptCaller(conn, rpc.AdoptedCaller{Framing: framing, Caps: c.Caps, ID: c.ID, Result: result,
			Unread: c.Unread, Answered: done}); err != nil {
			d.log.Warn("upgrade: the caller is not answered", "err", err.Error())
		}
		return done
	}
	res, _ := json.Marshal(result)
	body := []byte(`{"jsonrpc":"2.0","id":` + string(c.ID) + `,"result":` + string(res) + `}`)
	var frame []byte
	if strings.EqualFold(c.Framing, "header") {
		frame = append([]byte("Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"), body...)
	} else {
		frame = append(body, '\n')
	}
	timeout := d.cfg.WriteTimeout
	if timeout <= 0 {
		timeout = config.DefaultWriteTimeout
	}
	go func() {
		defer close(done)
		defer conn.Close()
		_ = conn.SetWriteDeadline(time.Now().Add(timeout))
		if _, err := conn.Write(frame); err != nil {
			d.log.Warn("upgrade: could not answer the caller", "err", err.Error())
		}
	}()
	return done
}

// waitCallerAnswered waits (bounded) until the upgrade's caller has its
// answer: a shutdown right behind an upgrade closes its connection only
// after it.
func (d *daemon) waitCallerAnswered() {
	if d.callerAnswered == nil {
		return
	}
	t := time.NewTimer(max(d.cfg.WriteTimeout, config.DefaultWriteTimeout) + time.Second)
	defer t.Stop()
	select {
	case <-d.callerAnswered:
	case <-t.C:
		d.log.Warn("upgrade: shutting down before the caller's answer was written")
	}
}

// stopAfterUpgrade: a shutdown signal reached the new image before it
// accepted (caught from serve's start, acted on once the sessions were
// adopted). The upgrade did complete: its caller is answered, then its
// connection closes with the shutdown; the inherited listener, if not yet
// served, is closed (our own socket unlinked, as at every shutdown).
func (d *daemon) stopAfterUpgrade(srv *rpc.Server, listening bool) {
	d.callerAnswered = d.answerCaller(srv, false)
	d.waitCallerAnswered()
	if d.handoff.consumed != "" {
		os.Remove(d.handoff.consumed)
	}
	if !listening && d.handoff.Listener.FD >= 0 {
		if l, err := d.inheritedListener(); err != nil {
			d.log.Warn("upgrade: the inherited listener", "err", err.Error())
		} else {
			l.Close()
		}
	}
	d.log.Info("upgrade complete; stopping: a signal came during the new image's startup", "from_version", d.handoff.FromVersion,
		"version", version.String(), "pid", os.Getpid(), "sessions", len(d.handoff.Sessions))
}

// callerConn wraps fd, the caller's connection handed over, after
// checking it is a connected unix stream socket (not a listener); on
// success fd is closed (the conn holds a dup).
func callerConn(fd int) (net.Conn, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("descriptor %d is not a socket (mode %#o, %v)", fd, st.Mode, err)
	}
	for _, o := range []struct {
		name      string
		opt, want int
	}{{"SO_TYPE", unix.SO_TYPE, unix.SOCK_STREAM}, {"SO_ACCEPTCONN", unix.SO_ACCEPTCONN, 0}} {
		if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, o.opt); err != nil || v != o.want {
			return nil, fmt.Errorf("descriptor %d: %s is %d, want %d (%v)", fd, o.name, v, o.want, err)
		}
	}
	if sa, err := unix.Getsockname(fd); err != nil {
		return nil, fmt.Errorf("descriptor %d: getsockname: %w", fd, err)
	} else if _, ok := sa.(*unix.SockaddrUnix); !ok {
		return nil, fmt.Errorf("descriptor %d is not an AF_UNIX socket (%T)", fd, sa)
	}
	if _, err := unix.Getpeername(fd); err != nil {
		return nil, fmt.Errorf("descriptor %d is not connected: %w", fd, err)
	}
	f := os.NewFile(uintptr(fd), "upgrade-caller")
	defer f.Close()
	conn, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("descriptor %d: %w", fd, err)
	}
	return conn, nil
}

// openStore opens the store: after a live upgrade on the descriptor the
// old image handed over (its flock was never released), else as usual.
func (d *daemon) openStore() (*store.Store, error) {
	if d.handoff == nil || d.handoff.StoreFD <= 2 {
		return store.Open(d.stateDir, lockTimeout)
	}
	f := os.NewFile(uintptr(d.handoff.StoreFD), "store")
	if f == nil {
		return nil, fmt.Errorf("%w: store descriptor %d", errHandoff, d.handoff.StoreFD)
	}
	return store.OpenInherited(d.stateDir, f, lockTimeout)
}
