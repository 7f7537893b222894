// Package autostart connects to the daemon's socket, starting `sessiond
// serve` when nobody accepts there: the one start path of the stdio front
// doors (`sessiond proxy`, `sessiond acp`). Starters exclude each other
// with an flock on <state-dir>/proxy-start.lock (the kernel drops it when
// its holder dies, so a crashed starter never leaves it stale; the name
// predates `sessiond acp` and is kept so binaries of both ages exclude
// each other); the lock's holder spawns, the others then find its daemon.
// A starter that does not take the lock (the TypeScript client's
// ensureDaemon) can still race it: the daemon's own single-instance rule
// (the store's flock, then the live socket never taken over) lets one
// serve and the other exit naming it, which Connect takes for no failure.
package autostart

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/config"
)

// startTimeout bounds how long a started daemon may take to accept.
const startTimeout = 15 * time.Second

// Errors of connecting.
var (
	// ErrNoDaemon: nothing accepts on the socket and no daemon could be
	// started there.
	ErrNoDaemon = errors.New("no daemon can be reached")
)

// Flags are the serve flags passed on to a daemon Connect starts.
type Flags struct {
	Socket, StateDir, Config string
}

func (f Flags) serveArgs() []string {
	args := []string{"serve", "--socket", f.Socket}
	if f.StateDir != "" {
		args = append(args, "--state-dir", f.StateDir)
	}
	if f.Config != "" {
		args = append(args, "--config", f.Config)
	}
	return args
}

// absent reports whether err means nobody accepts on the socket.
func absent(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// Connect dials the socket; when nobody accepts there it starts a daemon
// and dials until one accepts (the started one or another that won the
// store's flock), or the started one failed otherwise, or startTimeout.
func Connect(ctx context.Context, f Flags, bin string) (*net.UnixConn, error) {
	c, err := dial(ctx, f.Socket)
	if err == nil || !absent(err) {
		return c, err
	}
	// One starter at a time: front doors started together would each spawn a
	// daemon; the store's flock lets one run, but a loser still waiting
	// for it (2 s) would take over once the winner stops (`ctl shutdown`
	// undone). The lock's holder spawns; the others find its daemon.
	unlock, c, err := startLock(ctx, f)
	if err != nil || c != nil {
		return c, err
	}
	defer unlock()
	if c, err := dial(ctx, f.Socket); err == nil || !absent(err) {
		return c, err
	}
	st, err := start(f, bin)
	if err != nil {
		return nil, err
	}
	exited := st.exited
	deadline := time.Now().Add(startTimeout)
	for delay := 10 * time.Millisecond; ; delay = min(delay*2, 200*time.Millisecond) {
		c, err := dial(ctx, f.Socket)
		if err == nil || !absent(err) {
			return c, err
		}
		select {
		case res := <-exited:
			// Ours lost the race for the store (it says so and exits):
			// the winner accepts shortly. Anything else fails now.
			if !st.lostRace() {
				return nil, fmt.Errorf("%w: sessiond serve exited (%v) before accepting on %s; log %s", ErrNoDaemon, res, f.Socket, st.logFile)
			}
			exited = nil
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: nothing accepts on %s %v after starting sessiond serve; log %s", ErrNoDaemon, f.Socket, startTimeout, st.logFile)
		}
	}
}

func dial(ctx context.Context, path string) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}

// lockWait bounds the wait for the start lock: a starter that holds it
// longer (hung, or a hostile process of the same user) does not hang
// every front door behind it.
const lockWait = startTimeout + 5*time.Second

// startLock takes <state-dir>/proxy-start.lock (flock, exclusive; the
// kernel drops it if its holder dies, so a leftover file is never stale)
// and returns its release. While another starter holds it, it dials the
// socket between tries and returns the connection when that starter's
// daemon accepts; past lockWait it gives up naming the lock.
func startLock(ctx context.Context, f Flags) (func(), *net.UnixConn, error) {
	dir, err := config.StateDir(f.StateDir, os.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: state dir: %w", ErrNoDaemon, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("%w: state dir: %w", ErrNoDaemon, err)
	}
	path := filepath.Join(dir, "proxy-start.lock")
	lf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: start lock: %w", ErrNoDaemon, err)
	}
	deadline := time.Now().Add(lockWait)
	for delay := 10 * time.Millisecond; ; delay = min(delay*2, 200*time.Millisecond) {
		err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { lf.Close() }, nil, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			lf.Close()
			return nil, nil, fmt.Errorf("%w: start lock %s: %w", ErrNoDaemon, path, err)
		}
		if c, err := dial(ctx, f.Socket); err == nil || !absent(err) {
			lf.Close()
			return nil, c, err // the holder's daemon (or a daemon's refusal)
		}
		if time.Now().After(deadline) {
			lf.Close()
			return nil, nil, fmt.Errorf("%w: another process has held the start lock %s for over %s and no daemon accepts on %s", ErrNoDaemon, path, lockWait, f.Socket)
		}
		select {
		case <-ctx.Done():
			lf.Close()
			return nil, nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// started is a daemon this process spawned.
type started struct {
	exited  <-chan error // its Wait's result
	logFile string
	logFrom int64 // where its output begins in logFile
}

// start spawns `bin serve` detached (its own session, stdin /dev/null,
// output appended to <state-dir>/sessiond.log) and reports its exit.
func start(f Flags, bin string) (*started, error) {
	dir, err := config.StateDir(f.StateDir, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: state dir: %w", ErrNoDaemon, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: state dir: %w", ErrNoDaemon, err)
	}
	st := &started{logFile: filepath.Join(dir, "sessiond.log")}
	out, err := os.OpenFile(st.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: log: %w", ErrNoDaemon, err)
	}
	defer out.Close()
	if fi, err := out.Stat(); err == nil {
		st.logFrom = fi.Size()
	}
	cmd := exec.Command(bin, f.serveArgs()...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %s: %w", ErrNoDaemon, bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	st.exited = exited
	return st, nil
}

// lostRace reports whether the daemon's output since it started says it
// lost the start race to another daemon (the store's flock, or the socket).
func (st *started) lostRace() bool {
	b, err := os.ReadFile(st.logFile)
	if err != nil {
		return false
	}
	if st.logFrom <= int64(len(b)) {
		b = b[st.logFrom:]
	}
	s := string(b)
	return strings.Contains(s, "store is locked by another sessiond") || strings.Contains(s, "another sessiond is accepting on this socket")
}
