package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/host"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/version"
)

// upgrader runs daemon.upgrade in the old image: check the new binary,
// quiesce (calls, then the host), write the handoff, re-execute in place.
// It returns only when the upgrade did not happen; the daemon carries on.
type upgrader struct {
	d        *daemon
	h        *host.Host
	srv      *rpc.Server
	stateID  string
	cgroups  *proc.Cgroups       // cgroup mode's, nil in fallback mode
	store    *os.File            // the store's locked descriptor, handed over
	listener func() net.Listener // the one being served, nil before listen
	quiesce  time.Duration       // bound on in-flight calls and on the host's quiesce
}

// restartingWrite bounds the daemon.restarting write to each connection.
const restartingWrite = 500 * time.Millisecond

// refuse is upgrade_refused: data.cause is the whole cause (err
// included), the message says it once (err is wrapped, not repeated).
func refuse(what string, err error) error {
	cause := what
	if err != nil {
		cause += ": " + err.Error()
	}
	return &api.Error{Kind: api.KindUpgradeRefused, Msg: "upgrade refused: " + what, Err: err,
		Data: map[string]any{"cause": cause}}
}

// The causes a client acts on are codes, not sentences: data.cause is
// "in_progress" while another daemon.upgrade runs and "shutting_down" once
// a shutdown began (it wins: the upgrade is abandoned before the exec).
const (
	causeInProgress   = "in_progress"
	causeShuttingDown = "shutting_down"
)

// errShuttingDown: a shutdown began before the exec.
var errShuttingDown = errors.New("the daemon is shutting down")

// refuseCode is upgrade_refused with the code as data.cause, err saying
// it in words.
func refuseCode(code string, err error) error {
	return &api.Error{Kind: api.KindUpgradeRefused, Msg: "upgrade refused", Err: err, Data: map[string]any{"cause": code}}
}

// quoteBin quotes the binary's path for a cause: long enough to name it.
func quoteBin(bin string) string { return fmt.Sprintf("%q", api.Truncate(bin, 256)) }

func (u *upgrader) upgrade(ctx context.Context, p api.UpgradeParams) (api.UpgradeResult, error) {
	log := u.d.log
	bin := p.Binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return api.UpgradeResult{}, u.refused(refuse("cannot find the daemon's own executable", err))
		}
		bin = exe
	}
	ctx, ok, shutting := u.d.phase.startUpgrade(ctx)
	if !ok {
		if shutting {
			return api.UpgradeResult{}, u.refused(refuseCode(causeShuttingDown, errShuttingDown))
		}
		return api.UpgradeResult{}, u.refused(refuseCode(causeInProgress, rpc.ErrUpgrading))
	}
	defer u.d.phase.endUpgrade() // only a failed upgrade returns
	checking := time.Now()
	nb, err := checkBinary(ctx, bin)
	if err != nil {
		return api.UpgradeResult{}, u.refused(err)
	}
	toVersion, reads := nb.version, nb.formats
	log.Info("upgrade started", "binary", bin, "from_version", version.String(), "to_version", toVersion,
		"check_ms", msSince(checking))
	started := time.Now()
	qctx, cancel := context.WithTimeout(ctx, u.quiesce)
	defer cancel()
	if err := u.srv.PauseCalls(qctx); err != nil {
		return api.UpgradeResult{}, u.refused(refuse(fmt.Sprintf("calls in flight did not finish within %s", u.quiesce), err))
	}
	paused := time.Now()
	q, err := u.h.Quiesce(qctx)
	if err != nil {
		u.srv.ResumeCalls()
		return api.UpgradeResult{}, u.refused(refuse("a session cannot be handed over", err))
	}
	if err := u.h.CheckHandover(q.Sessions); err != nil {
		q.Abandon()
		u.srv.ResumeCalls()
		return api.UpgradeResult{}, u.refused(refuse("a session's stored state is damaged", err))
	}
	format := handoffFormat
	if len(q.Runtimes) > 0 {
		format = handoffFormatRuntimes
		if !slices.Contains(reads, format) {
			q.Abandon()
			u.srv.ResumeCalls()
			return api.UpgradeResult{}, u.refused(refuse(fmt.Sprintf("%s reads handoff formats %v, not %s (shared runtime %s runs)",
				quoteBin(bin), reads, format, q.Runtimes[0].ID), nil))
		}
	}
	abandon := func(cause string, err error) (api.UpgradeResult, error) {
		u.srv.ResumeAccepting()
		q.Abandon()
		u.srv.ResumeCalls()
		if errors.Is(err, errShuttingDown) {
			return api.UpgradeResult{}, u.refused(refuseCode(causeShuttingDown, err))
		}
		return api.UpgradeResult{}, u.refused(refuse(cause, err))
	}
	var l net.Listener
	if u.listener != nil {
		l = u.listener()
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		return abandon("the daemon is not listening yet", nil)
	}
	u.srv.StopAccepting()
	lfd, err := proc.Inheritable(ul, true)
	if err != nil {
		return abandon("listener descriptor", err)
	}
	sfd, err := proc.Inheritable(u.store, true)
	if err != nil {
		_, _ = proc.Inheritable(ul, false)
		return abandon("store descriptor", err)
	}
	// cgroup mode's inotify instance, to a binary that reuses it: the
	// exec would otherwise wait for the kernel to tear it down.
	var inotify syscall.Conn
	ifd := 0
	if u.cgroups != nil && slices.Contains(nb.features, handoffInotify) {
		inotify = u.cgroups.Inotify()
		if ifd, err = proc.Inheritable(inotify, true); err != nil {
			log.Warn("upgrade: the inotify instance is not handed over; the new image makes its own", "err", err.Error())
			_, _ = proc.Inheritable(inotify, false)
			inotify, ifd = nil, 0
		}
	}
	ho := &handoff{Format: format, InotifyFD: ifd, FromVersion: version.String(), ToVersion: toVersion, PID: os.Getpid(),
		StateID: u.stateID, WrittenAt: time.Now().UTC(), NotifySocket: u.d.notifySocket,
		Listener: handoffListener{FD: lfd, Socket: u.d.socket, Activated: u.d.act.listener != nil},
		Sessions: q.Sessions, Runtimes: q.Runtimes, CgroupBase: u.cgroups.Base(), StoreFD: sfd}
	var callerConn *net.UnixConn
	if c, ok := rpc.Caller(ctx); ok && c.Conn != nil && len(c.ID) > 0 {
		// A dup made for the new image: the connection's own descriptor
		// may be closed (the caller hung up) and its number reused.
		if fd, err := dupInheritable(c.Conn); err == nil {
			callerConn = c.Conn
			ho.Caller = &handoffCaller{FD: fd, Framing: c.Framing.String(), ID: c.ID, Serve: true, Caps: c.Caps, Unread: c.Unread()}
		} else {
			log.Warn("upgrade: the caller's connection cannot be handed over; it is not answered", "err", err.Error())
		}
	}
	undoFDs := func() {
		_, _ = proc.Inheritable(ul, false)
		_, _ = proc.Inheritable(u.store, false)
		if inotify != nil {
			_, _ = proc.Inheritable(inotify, false)
		}
		if ho.Caller != nil {
			unix.Close(ho.Caller.FD)
			ho.Caller = nil
		}
	}
	quiesced := time.Now()
	path, err := writeHandoff(u.d.stateDir, ho)
	if err != nil {
		undoFDs()
		return abandon("write the handoff", err)
	}
	written := time.Now()
	if id := q.Exited(); id != "" {
		// Its exit was reaped here: the new image could not adopt it.
		os.Remove(path)
		undoFDs()
		return abandon(id+"'s provider exited during the upgrade; try again", nil)
	}
	if u.d.phase.shuttingDown() {
		os.Remove(path)
		undoFDs()
		return abandon("", errShuttingDown)
	}
	dropped := u.srv.Restarting(api.RestartingNotice{FromVersion: version.String(), ToVersion: toVersion}, restartingWrite)
	if ho.Caller != nil && slices.Contains(dropped, net.Conn(callerConn)) {
		// Busy writing (or its notification cut): an answer written after
		// it would reach the caller inside a frame.
		log.Warn("upgrade: the caller's connection was still being written to; the new image does not answer it")
		unix.Close(ho.Caller.FD)
		ho.Caller, callerConn = nil, nil
		if path, err = writeHandoff(u.d.stateDir, ho); err != nil {
			undoFDs()
			u.srv.Unseal(nil)
			return abandon("write the handoff", err)
		}
	}
	log.Info("upgrade: re-executing in place", "binary", bin, "pid", os.Getpid(), "sessions", len(q.Sessions),
		"runtimes", len(q.Runtimes), "handoff", path, "quiesce_ms", time.Since(started).Milliseconds(),
		"pause_calls_ms", ms(paused.Sub(started)), "quiesce_host_ms", ms(quiesced.Sub(paused)), "handoff_write_ms", ms(written.Sub(quiesced)))
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, HandoffEnv+"=") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			env = append(env, kv)
		}
	}
	env = append(env, HandoffEnv+"="+path)
	if u.d.notifySocket != "" {
		env = append(env, "NOTIFY_SOCKET="+u.d.notifySocket)
	}
	ran, err := u.d.phase.execLocked(func() error { return syscall.Exec(bin, append([]string{bin}, os.Args[1:]...), env) })
	// Only a failed or abandoned exec comes back here.
	os.Remove(path)
	undoFDs()
	if !ran {
		u.srv.Unseal(callerConn)
		return abandon("", errShuttingDown)
	}
	u.srv.Unseal(callerConn) // the caller gets upgrade_refused
	return abandon("exec "+bin, err)
}

// ms is d in milliseconds, to the microsecond (the upgrade's phases are
// a few milliseconds each); msSince is ms since t.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func msSince(t time.Time) float64 { return ms(time.Since(t)) }

// refused logs the refusal; once a shutdown began, whatever failed (the
// shutdown may have cut it short: it cancels the upgrade's context) the
// cause is shutting_down.
func (u *upgrader) refused(err error) error {
	var ae *api.Error
	if u.d.phase.shuttingDown() && !(errors.As(err, &ae) && ae.Data["cause"] == causeShuttingDown) {
		u.d.log.Info("upgrade: a shutdown began; it wins", "err", err.Error())
		err = refuseCode(causeShuttingDown, errShuttingDown)
	}
	u.d.log.Warn("upgrade refused; the daemon carries on", "err", err.Error())
	return err
}

// dupInheritable duplicates c's descriptor, inheritable (dup clears
// close-on-exec), for the next image.
func dupInheritable(c syscall.Conn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(u uintptr) { fd, derr = unix.Dup(int(u)) }); err != nil {
		return -1, err
	}
	return fd, derr
}
