package daemon

import (
	"log/slog"
	"net"
	"os"

	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/systemd"
)

// activation is what systemd handed the daemon: a listening socket
// (LISTEN_FDS) and a readiness socket (NOTIFY_SOCKET). Started by hand,
// both are empty and serve behaves as without systemd.
type activation struct {
	listener *net.UnixListener // nil: bind the socket ourselves
	notifier *systemd.Notifier
}

// readActivation reads LISTEN_PID/LISTEN_FDS/NOTIFY_SOCKET and removes them
// from the environment, so no provider child inherits them. A bad
// LISTEN_* combination is an error naming what was wrong (serve exits 1);
// an unusable NOTIFY_SOCKET is logged and ignored, as sd_notify does.
func readActivation(log *slog.Logger) (activation, error) {
	defer systemd.UnsetEnv()
	n, err := systemd.NewNotifier(os.Getenv)
	if err != nil {
		log.Warn("NOTIFY_SOCKET ignored: no readiness notifications", "err", err.Error())
		n = &systemd.Notifier{}
	}
	l, err := systemd.Inherited(os.Getenv, os.Getpid(), systemd.ListenFDsStart)
	if err != nil {
		return activation{}, err
	}
	return activation{listener: l, notifier: n}, nil
}

// adoptPath makes the inherited socket's path the daemon's socket (what
// daemon.status and the "listening" line report); a path other than the
// configured one is served anyway, with a warning.
func (d *daemon) adoptPath() {
	if d.act.listener == nil {
		return
	}
	if path := d.act.listener.Addr().String(); path != d.socket {
		d.log.Warn("serving on the socket systemd passed, not the configured path (ctl needs --socket)",
			"socket", path, "configured", d.socket)
		d.socket = path
	}
}

// listen is the startup's listen step: the inherited socket after the same
// directory checks as our own (never unlinked: the socket unit owns it),
// else a socket of our own.
func (d *daemon) listen() (net.Listener, error) {
	if d.handoff != nil {
		return d.inheritedListener()
	}
	if d.act.listener == nil {
		return rpc.Listen(d.socket, d.log)
	}
	if _, err := rpc.Adopt(d.act.listener, d.log); err != nil {
		return nil, err
	}
	return d.act.listener, nil
}

// notify tells systemd about a state change (READY=1, STOPPING=1); without
// NOTIFY_SOCKET it does nothing. A failure is logged, never fatal.
func (d *daemon) notify(state string) {
	if err := d.act.notifier.Notify(state); err != nil {
		d.log.Warn("sd_notify failed", "state", state, "err", err.Error())
	} else if d.act.notifier.Enabled() {
		d.log.Debug("sd_notify sent", "state", state)
	}
}
