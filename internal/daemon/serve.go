package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/budget"
	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/host"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/store"
	"github.com/sessiond/sessiond/internal/version"
)

// lockTimeout bounds the wait for the store's flock (PROTOCOL.md: 2 s).
const lockTimeout = 2 * time.Second

// Serve is `sessiond serve`: it runs the daemon until a signal or
// daemon.shutdown stops it (or a live upgrade replaces it) and
// returns the exit code.
func Serve(args []string, stderr io.Writer) int {
	sigs, stopCatching := catchSignals() // first: a signal before the handler is acted on once it can be
	defer stopCatching()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "socket path (default $SESSIOND_SOCKET, $XDG_RUNTIME_DIR/sessiond/sessiond.sock, /tmp/sessiond-$UID/sessiond.sock)")
	stateFlag := fs.String("state-dir", "", "state directory (default $SESSIOND_STATE_DIR, $XDG_STATE_HOME/sessiond, ~/.local/state/sessiond)")
	cfgFlag := fs.String("config", "", "config file (default $SESSIOND_CONFIG, $XDG_CONFIG_HOME/sessiond/config.toml)")
	level := fs.String("log-level", "info", "debug|info|warn|error")
	format := fs.String("log-format", "auto", "auto|text|json (auto: coloured text on a terminal, JSON otherwise)")
	if err := fs.Parse(args); err != nil {
		return exitcode.Usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessiond serve: unexpected argument %q\n", fs.Arg(0))
		return exitcode.Usage
	}
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		fmt.Fprintln(stderr, "sessiond serve:", err)
		return exitcode.Usage
	}
	notifySocket := os.Getenv("NOTIFY_SOCKET") // a live upgrade hands it to the next image
	act, err := readActivation(log)
	if err != nil {
		log.Error("socket activation refused", "err", err.Error())
		return exitcode.Error
	}
	cfgPath, explicit := config.ConfigPath(*cfgFlag, os.Getenv)
	cfg, err := config.Load(cfgPath, explicit)
	if err != nil {
		log.Error("bad configuration", "err", err.Error())
		return exitcode.Error
	}
	stateDir, err := config.StateDir(*stateFlag, os.Getenv)
	if err != nil {
		log.Error("no state directory", "err", err.Error())
		return exitcode.Error
	}
	_, handoffNamed := os.LookupEnv(HandoffEnv) // takeHandoff removes it
	ho, err := takeHandoff(stateDir, log)
	if err != nil {
		log.Error("cannot adopt the live upgrade's handoff; exiting (the next start reaps as after a crash)", "err", err.Error())
		return exitcode.Error
	}
	d := &daemon{cfg: cfg, stateDir: stateDir, socket: rpc.SocketPath(*socket, os.Getenv), log: log, config: cfgPath, act: act,
		notifySocket: notifySocket, handoff: ho, handoffNamed: handoffNamed, sigs: sigs}
	if ho != nil {
		d.socket = ho.Listener.Socket
	}
	if act.listener != nil {
		defer act.listener.Close() // never unlinks: the socket unit owns the file
		d.adoptPath()
	}
	if err := d.run(); err != nil {
		return exitcode.Error
	}
	return exitcode.OK
}

type daemon struct {
	cfg      config.Config
	stateDir string
	socket   string
	config   string
	log      *slog.Logger
	act      activation // what systemd passed; empty when started by hand
	// notifySocket is systemd's NOTIFY_SOCKET as the daemon found it.
	notifySocket string
	// handoff is the live upgrade this image takes over (nil: a plain start).
	handoff *handoff
	// handoffNamed: the environment named a handoff (this image's or,
	// ignored, another's); only a start that named none removes a
	// leftover one.
	handoffNamed bool
	// phase keeps a live upgrade and a shutdown apart (upgrade_gate.go).
	phase upgradeGate
	// sigs are the shutdown signals caught since serve began (catchSignals).
	sigs chan os.Signal
	// callerAnswered is closed once a live upgrade's caller was answered
	// (or cannot be): a shutdown closes no connection before.
	callerAnswered <-chan struct{}
}

// run is the daemon's life: flock first, then startup (reap, restore,
// listen), serve until a signal or daemon.shutdown, then tear down in
// reverse order. Errors are logged here.
func (d *daemon) run() error {
	log := d.log
	// 1. The store's flock, before any process is signalled or the socket touched.
	restoreGC := d.holdGC() // a live upgrade's new image: until it accepts
	opened := time.Now()
	st, err := d.openStore()
	if errors.Is(err, store.ErrLocked) {
		log.Error("another sessiond is running on this state directory", "state_dir", d.stateDir, "err", err.Error())
		return err
	}
	if errors.Is(err, store.ErrCopyInUse) {
		log.Error("refusing to start: the state directory is a copy of one in use", "state_dir", d.stateDir, "err", err.Error())
		return err
	}
	var refused *store.RefusalError
	if errors.As(err, &refused) {
		// One line naming the file, what is wrong and the fix; the file
		// is left exactly as it is.
		log.Error("refusing to start: "+refused.Kind.Error(), "path", refused.Path, "err", refused.Reason, "fix", refused.Fix)
		return err
	}
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		log.Error("cannot open the store: the state directory is not writable", "state_dir", d.stateDir, "err", err.Error(),
			"fix", "make it writable (remount read-write, fix its owner or mode) or pass another --state-dir")
		return err
	}
	if err != nil {
		log.Error("cannot open the store", "state_dir", d.stateDir, "err", err.Error())
		return err
	}
	defer st.Close() // last: releases the flock
	// ms covers the validation and bbolt's consistency check.
	log.Info("store opened", "path", st.Path, "ms", time.Since(opened).Milliseconds())
	for _, w := range st.Warnings {
		log.Warn("store opened with a warning", "path", st.Path, "detail", w)
	}
	keep := ""
	if d.handoff != nil {
		keep = d.handoff.consumed
	} else if !d.handoffNamed {
		// A plain start (no handoff named: one that names another's is
		// left alone), under the flock: not a handoff in flight.
		removeStaleHandoff(d.stateDir, log)
	}
	removeHandoffTemps(d.stateDir, keep, log) // under the flock: no other daemon is writing one
	parts := &attentionParts{}
	att := d.newAttention(parts)
	defer att.Close() // after the journal's close: nothing is observed any more
	j, err := journal.Open(st.DB, journal.Options{Logger: log, Observe: att.Observe})
	if err != nil {
		log.Error("cannot open the journal", "err", err.Error())
		return err
	}
	defer j.Close() // after the host has drained its sinks
	parts.j = j
	providers, err := d.providers()
	if err != nil {
		log.Error("bad provider configuration", "err", err.Error())
		return err
	}
	cgroups, supervision := d.openCgroups(st.StateID)
	defer cgroups.Close() // after the host's shutdown: every session cgroup is gone by then
	h, err := host.New(host.Options{
		Store: st, Journal: j, Providers: providers,
		IdleTimeout: d.cfg.IdleTimeout, StartTimeout: d.cfg.StartTimeout, StepTimeout: d.cfg.StepTimeout,
		Ladder: proc.Ladder{Grace: d.cfg.Ladder.Grace, TermTimeout: d.cfg.Ladder.TermTimeout, KillTimeout: d.cfg.Ladder.KillTimeout},
		Logger: log, Cgroups: cgroups, PortableHistoryBytes: d.cfg.PortableHistoryBytes,
	})
	if err != nil {
		log.Error("cannot start the host", "err", err.Error())
		return err
	}
	if d.handoff != nil {
		// Before the subreaper: its reaper must never take an adopted child's status.
		if err := d.adoptHandoff(h, st.StateID); err != nil {
			log.Error("cannot adopt the live upgrade's sessions; exiting (the next start reaps as after a crash)", "err", err.Error())
			return err
		}
	}
	if stop, err := proc.SetSubreaper(log); err != nil {
		log.Warn("not a child subreaper: recording each child's descendants while it runs instead", "err", err.Error(),
			"every", recordEvery.String())
		defer proc.RecordDescendants(recordEvery)()
	} else {
		defer stop()
	}

	ctx, beginShutdown, stopSignals := d.handleSignals()
	defer stopSignals()
	shutdown := make(chan struct{})
	var once sync.Once
	maxConns := d.cfg.MaxConnections
	if nofile, err := rpc.RaiseFDLimit(); err != nil {
		log.Warn("cannot raise the open-files limit", "err", err.Error(), "nofile", nofile)
	} else if keep := int(min(nofile, 1<<30) / 2); maxConns > keep {
		// half the descriptors stay for providers' pipes and the store
		log.Warn("max_connections lowered to half the open-files limit", "max_connections", keep, "configured", maxConns, "nofile", nofile)
		maxConns = keep
	}
	srv := rpc.NewServer(rpc.ServerOptions{
		Backend: h, MaxMessageBytes: d.cfg.MaxMessageBytes, WriteTimeout: d.cfg.WriteTimeout,
		MaxOutboundBytes: d.cfg.MaxOutboundBytes, MaxConnections: maxConns,
		InitializeTimeout: d.cfg.InitializeTimeout,
		Version:           version.String(), Socket: d.socket, StateDir: d.stateDir, StateID: st.StateID, StartedAt: time.Now(),
		Supervision: supervision, Attention: att.Status,
		OnShutdown: func() { d.phase.markShutdown(); once.Do(func() { close(shutdown) }) }, Logger: log,
	})
	parts.h, parts.srv = h, srv
	att.Start() // now: a restart's or an upgrade's open turns keep the machine awake from here
	served := make(chan error, 1)
	var serving atomic.Pointer[net.Listener]
	up := &upgrader{d: d, h: h, srv: srv, stateID: st.StateID, cgroups: cgroups, store: st.File(), quiesce: d.cfg.StepTimeout, listener: func() net.Listener {
		if p := serving.Load(); p != nil {
			return *p
		}
		return nil
	}}
	srv.SetUpgrade(up.upgrade)
	listen := func(context.Context) error {
		l, err := d.listen()
		if err != nil {
			return err
		}
		serving.Store(&l)
		go func() { served <- srv.Serve(l) }()
		log.Info("listening", "socket", d.socket, "state_dir", d.stateDir, "state_id", st.StateID,
			"config", d.config, "providers", d.cfg.ProviderNames(), "pid", os.Getpid(), "version", version.String())
		return nil
	}
	if err := h.Startup(ctx, listen); err != nil {
		if ctx.Err() != nil {
			// A signal during startup is a shutdown request, not a failure.
			beginShutdown()
			d.notify("STOPPING=1")
			if d.handoff != nil {
				d.stopAfterUpgrade(srv, serving.Load() != nil)
			}
			srv.Close()
			if err := d.shutdownHost(h); err != nil {
				return err
			}
			log.Info("stopped during startup")
			return nil
		}
		if errors.Is(err, rpc.ErrSocketInUse) {
			log.Error("another sessiond is accepting on this socket", "socket", d.socket, "err", err.Error())
		} else {
			log.Error("startup failed", "socket", d.socket, "err", err.Error())
		}
		srv.Close()
		d.shutdownHost(h)
		return err
	}
	d.notify("READY=1") // only now: the listen step has run
	restoreGC()
	if d.handoff != nil {
		d.callerAnswered = d.answerCaller(srv, true)
		log.Info("upgrade complete", "from_version", d.handoff.FromVersion, "version", version.String(), "pid", os.Getpid(),
			"sessions", len(d.handoff.Sessions), "since_exec_ms", time.Since(d.handoff.WrittenAt).Milliseconds())
		if d.handoff.consumed != "" {
			go os.Remove(d.handoff.consumed) // its blocks freed off the calls' path (readHandoff)
		}
	}
	var serveErr error
	select {
	case <-ctx.Done(): // logged by handleSignals
	case <-shutdown:
		log.Info("daemon.shutdown received, shutting down")
	case serveErr = <-served:
		log.Error("listener failed", "err", fmt.Sprint(serveErr))
	}
	d.phase.beginShutdown() // a running upgrade aborts first
	wctx, wcancel := context.WithTimeout(context.Background(), max(d.cfg.WriteTimeout, time.Second))
	srv.WaitUpgradeAnswered(wctx) // its caller gets upgrade_refused
	wcancel()
	beginShutdown() // from here on a signal is answered with a log line only
	d.notify("STOPPING=1")
	// Cancel writes to every child first (the server's close waits for
	// in-flight calls, and a send may be blocked on a child that stopped
	// reading), then stop taking calls (connections close, their holds
	// end), then evict every live session, then the journal and the store
	// (deferred).
	h.BeginShutdown()
	d.waitCallerAnswered() // a shutdown right after the upgrade: the caller has its answer first
	srv.Close()
	if err := d.shutdownHost(h); err != nil {
		return err
	}
	log.Info("stopped")
	if serveErr != nil {
		return serveErr
	}
	return nil
}

func (d *daemon) shutdownHost(h *host.Host) error {
	ctx, cancel := context.WithTimeout(context.Background(), budget.Shutdown(budget.Ladder(d.cfg.Ladder), d.cfg.StepTimeout))
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		d.log.Error("shutdown left work undone", "err", err.Error())
		return err
	}
	return nil
}
