package rpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/config"
)

// ServerOptions configure a Server.
type ServerOptions struct {
	Backend         api.Backend
	MaxMessageBytes int           // 0: config.DefaultMaxMessageBytes
	WriteTimeout    time.Duration // 0: config.DefaultWriteTimeout
	// MaxOutboundBytes bounds the unwritten output held for all
	// connections together (outbound.go); 0: config.DefaultMaxOutboundBytes.
	MaxOutboundBytes int64
	// MaxConnections bounds the connections open at once (admit.go);
	// 0: config.DefaultMaxConnections.
	MaxConnections int
	// InitializeTimeout: a connection without initialize for this long is
	// closed; 0: config.DefaultInitializeTimeout.
	InitializeTimeout time.Duration
	Version           string
	Socket            string
	StateDir          string
	StateID           string
	StartedAt         time.Time
	// Supervision is daemon.status's supervision (the cgroup or fallback
	// mode and why).
	Supervision api.Supervision
	// OnShutdown runs (in its own goroutine) after daemon.shutdown's reply
	// was written.
	OnShutdown func()
	// Upgrade runs daemon.upgrade (nil: refused). It returns only when the
	// upgrade did not happen; on success the process is replaced and the
	// next image answers the caller (Caller(ctx)).
	Upgrade func(ctx context.Context, p api.UpgradeParams) (api.UpgradeResult, error)
	// Attention is daemon.status's attention (nil: not reported).
	Attention func() api.AttentionStatus
	Logger    *slog.Logger

	stallAfter time.Duration // tests: the outbound budget's stall time (0: stallAfter)
}

// Server answers JSON-RPC on accepted connections.
type Server struct {
	o      ServerOptions
	log    *slog.Logger
	table  map[string]method
	euid   atomic.Int64 // peers must match; a field so tests can pretend to be someone else
	ctx    context.Context
	cancel context.CancelFunc
	nextID atomic.Uint64
	stats  stats
	status statusParts // daemon.status's static bytes (status.go)
	out    *outbound
	// listGate: agentSession.list replies being built (list.go).
	listGate chan struct{}

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]*conn // value nil until framed
	wg        sync.WaitGroup     // one per accepted connection

	gate   callGate     // calls in flight, held during an upgrade (upgrade.go)
	upg    upgradeCalls // daemon.upgrade calls not yet answered (restarting.go)
	accept acceptPause  // accepting stopped by an upgrade
	sealed sealSet      // connections told daemon.restarting

	workers workerPool // runs the connections' queues (workers.go)

	refusedLoggedAt time.Time // admit.go's log limit
	refusedSinceLog int
	closeLog        *closeLog // the close lines' limit per reason (closelog.go)
}

// NewServer builds a server; Serve starts it.
func NewServer(o ServerOptions) *Server {
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = config.DefaultMaxMessageBytes
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = config.DefaultWriteTimeout
	}
	if o.MaxOutboundBytes <= 0 {
		o.MaxOutboundBytes = config.DefaultMaxOutboundBytes
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = config.DefaultMaxConnections
	}
	if o.InitializeTimeout <= 0 {
		o.InitializeTimeout = config.DefaultInitializeTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		o: o, log: o.Logger, table: newTable(methodList), out: newOutbound(o.MaxOutboundBytes, o.Logger),
		closeLog: newCloseLog(o.Logger),
		ctx:      ctx, cancel: cancel, listGate: make(chan struct{}, listBuilders),
		listeners: map[net.Listener]struct{}{}, conns: map[net.Conn]*conn{},
	}
	if o.stallAfter > 0 {
		s.out.stall = o.stallAfter
	}
	s.stats.out = s.out
	s.euid.Store(int64(os.Geteuid()))
	return s
}

// Serve accepts on l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	backoff := 5 * time.Millisecond
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if s.acceptPaused() {
				continue // an upgrade stopped accepting; it was abandoned
			}
			s.log.Warn("accept failed", "err", err.Error(), "retry_in", backoff)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		if !s.admitLocked() {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[nc] = nil
		s.wg.Add(1)
		s.mu.Unlock()
		s.stats.connsTotal.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(nc)
			s.mu.Lock()
			delete(s.conns, nc)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection (each runs ConnClosed)
// and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.workers.close() // every connection's handlers are done
	s.closeLog.stop() // after the last connection's line
	return nil
}

func (s *Server) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		if c != nil {
			n++
		}
	}
	return n
}

func (s *Server) serveConn(nc net.Conn) { s.serveConnAs(nc, nil) }

// serveConnAs serves nc; ad (not nil) is the previous image's
// daemon.upgrade caller, served as an initialized connection (upgrade.go).
func (s *Server) serveConnAs(nc net.Conn, ad *adoptedCaller) {
	defer nc.Close()
	id := "c-" + strconv.FormatUint(s.nextID.Add(1), 10)
	log := s.log.With("conn_id", id)
	cred, err := peerCred(nc)
	if err != nil || int64(cred.Uid) != s.euid.Load() {
		s.stats.refusedPeers.Add(1)
		if err != nil {
			log.Warn("peer refused: credentials unreadable", "err", err.Error())
		} else {
			log.Warn("peer refused: uid differs", "peer_uid", cred.Uid, "peer_pid", cred.Pid, "euid", s.euid.Load())
		}
		return
	}
	log = log.With("peer_pid", cred.Pid)
	dr := &deadlineReader{conn: nc, initBy: time.Now().Add(s.o.InitializeTimeout), stall: s.o.WriteTimeout}
	br, framing, err := s.framed(dr, ad)
	if err != nil {
		s.readFault(log, err, dr)
		return
	}
	st := newStream(nc, br, framing, s.o.MaxMessageBytes, s.o.WriteTimeout)
	st.dl = dr
	st.onBatch = func() {
		s.stats.batchesRefused.Add(1)
		log.Info("batch refused", "reason", "batch_not_supported")
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	c := &conn{srv: s, id: id, framing: framing, log: log, ctx: ctx, cancel: cancel, st: st, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.conns[nc] = c
	s.mu.Unlock()
	s.out.register(st, id)
	defer s.out.unregister(st)
	log.Debug("connection framed", "framing", framing.String())
	if ad != nil {
		ad.start(c)
	}
	c.readLoop() // the connection's one reader: returns when reading ended
	cancel()     // handlers' and pumps' ctx
	c.finish()
	if rerr, werr := st.errs(); st.shed.Load() {
		// logged by the budget when it closed the connection
	} else if werr != nil {
		s.writeFault(log, werr)
	} else if !s.isClosed() {
		s.readFault(log, rerr, dr)
	}
}

// framed buffers a connection's reads and finds its framing: sniffed from
// its first bytes or, for an adopted upgrade caller, the one it had, its
// bytes read and not parsed by the previous image read first.
func (s *Server) framed(dr *deadlineReader, ad *adoptedCaller) (*bufio.Reader, Framing, error) {
	if ad == nil {
		br := bufio.NewReaderSize(dr, 64<<10)
		f, err := sniff(br)
		return br, f, err
	}
	dr.initBy = time.Time{} // initialized in the previous image
	return bufio.NewReaderSize(io.MultiReader(bytes.NewReader(ad.unread), dr), 64<<10), ad.framing, nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// readFault logs, once, why a connection's reading ended (closereason.go).
func (s *Server) readFault(log *slog.Logger, err error, dr *deadlineReader) {
	reason := readReason(err, dr.timeoutReason)
	if framingFault(reason) {
		s.stats.framingFaults.Add(1)
	}
	if reason != reasonClosed && !s.closeLog.allow(reason) {
		return
	}
	switch {
	case reason == reasonClosed:
		log.Debug("connection closed", "reason", reason)
	case reason == reasonPeerClosed && errors.Is(err, io.EOF):
		log.Info("connection closed", "reason", reason)
	case reason == reasonPeerClosed, reason == reasonReset:
		log.Info("connection closed", "reason", reason, "err", err.Error())
	default:
		log.Warn("closing connection", "reason", reason, "err", err.Error())
	}
}

// writeFault logs, once, why a write to the connection failed.
func (s *Server) writeFault(log *slog.Logger, err error) {
	reason := writeReason(err)
	if reason == reasonWriteTimeout {
		s.stats.writeTimeouts.Add(1)
	}
	if reason != reasonClosed && !s.closeLog.allow(reason) {
		return
	}
	switch reason {
	case reasonWriteTimeout:
		log.Warn("closing connection: peer stopped reading", "reason", reason, "write_timeout", s.o.WriteTimeout)
	case reasonClosed:
		log.Debug("connection closed while writing", "reason", reason)
	case reasonPeerClosed, reasonReset:
		log.Info("connection closed", "reason", reason, "err", err.Error())
	default:
		log.Warn("closing connection: write failed", "reason", reason, "err", err.Error())
	}
}
