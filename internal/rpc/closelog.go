package rpc

import (
	"log/slog"
	"sync"
	"time"
)

// closeLog rate-limits the connection-close log lines per reason: at most
// closeLogBurst lines of one reason per closeLogEvery, the window opening
// with its first line. Past that the lines are counted, not written, and
// once the window ends one summary line names the reason and how many were
// suppressed (so one local client opening connections that send junk
// cannot fill the disk with one WARN each: 39,123 lines, 7.4 MB in 5 s
// were seen). Counters (daemon.stats) still count every close.
type closeLog struct {
	log   *slog.Logger
	every time.Duration
	burst int

	mu      sync.Mutex
	reasons map[string]*closeWindow
	stopped bool
}

// closeWindow is one reason's current window.
type closeWindow struct {
	start      time.Time
	n          int         // lines written in it
	suppressed int         // lines counted, not written
	flush      *time.Timer // set once a line was suppressed: the summary at the window's end
}

const (
	closeLogBurst = 10
	closeLogEvery = time.Second
)

func newCloseLog(log *slog.Logger) *closeLog {
	return &closeLog{log: log, every: closeLogEvery, burst: closeLogBurst, reasons: map[string]*closeWindow{}}
}

// allow reports whether a close line of reason may be written now.
func (l *closeLog) allow(reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	w := l.reasons[reason]
	if w == nil || w.flush == nil && now.Sub(w.start) >= l.every {
		w = &closeWindow{start: now}
		l.reasons[reason] = w
	}
	if w.n < l.burst {
		w.n++
		return true
	}
	w.suppressed++
	if w.flush == nil && !l.stopped {
		w.flush = time.AfterFunc(max(l.every-now.Sub(w.start), 0), func() { l.summary(reason, w) })
	}
	return false
}

// summary writes w's suppressed count and ends its window.
func (l *closeLog) summary(reason string, w *closeWindow) {
	l.mu.Lock()
	n := w.suppressed
	if l.reasons[reason] == w {
		delete(l.reasons, reason)
	}
	w.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn("connection close lines suppressed", "reason", reason, "suppressed", n,
			"limit_per_second", l.burst)
	}
}

// stop writes every pending summary now and schedules no more (Server.Close).
func (l *closeLog) stop() {
	l.mu.Lock()
	l.stopped = true
	pending := map[string]*closeWindow{}
	for r, w := range l.reasons {
		if w.flush != nil && w.flush.Stop() {
			pending[r] = w
		}
	}
	l.mu.Unlock()
	for r, w := range pending {
		l.summary(r, w)
	}
}
