package attention

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// callTimeout bounds one inhibitor or desktop call.
const callTimeout = 5 * time.Second

// Notify modes (config notify).
const (
	NotifyNone    = "none"
	NotifyDesktop = "desktop"
)

// Options configure an Attention. Every func is called from its own
// goroutine, never from the journal's writer.
type Options struct {
	// Inhibitor is used while a turn runs; nil: keep_awake = false.
	Inhibitor Inhibitor
	// Running counts the turns open now (from the journal's state).
	Running func() int
	// Desktop posts a notification when Attached says no surface is
	// attached; nil: notify = "none".
	Desktop Desktop
	// Attached reports whether a surface is attached to a session.
	Attached func(sessionID string) bool
	// Title is a session's title ("" when it has none).
	Title func(sessionID string) string
	// Publish hands a notice to the connections (rpc).
	Publish func(api.AttentionNotice)
	Logger  *slog.Logger
}

// Attention is the keep-awake and notification loop.
//
// Lock order: mu only; no call out is made while holding it.
type Attention struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	queue   []event.Event // observed, not yet handled
	held    bool
	reason  string // why keep-awake does not work now ("" when it does)
	closed  bool
	started bool

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// Only the loop touches these.
	inhibitor io.Closer // the held inhibitor, nil when none
	warned    bool      // the inhibitor's unavailability was logged
}

// New builds an Attention; Start runs it.
func New(o Options) *Attention {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Attention{o: o, log: o.Logger, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if o.Inhibitor == nil {
		a.reason = "keep_awake = false"
	}
	return a
}

// Observe takes a committed batch of events (journal.Options.Observe):
// it keeps the few that matter and returns at once.
func (a *Attention) Observe(evs []event.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	n := len(a.queue)
	for _, ev := range evs {
		switch ev.Type {
		case event.TurnStarted, event.TurnCompleted, event.ApprovalRequested:
			ev.Raw = nil
			a.queue = append(a.queue, ev)
		}
	}
	if len(a.queue) > n {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// Start runs the loop: it probes the inhibitor, takes one if turns run
// already (a restart, a live upgrade's adopted sessions), then handles
// what Observe queued.
func (a *Attention) Start() {
	a.mu.Lock()
	a.started = true
	a.mu.Unlock()
	go a.run()
}

// Close stops the loop and releases the inhibitor. Observe does nothing after.
func (a *Attention) Close() {
	a.closeOnce.Do(func() {
		a.mu.Lock()
		a.closed = true
		started := a.started
		a.mu.Unlock()
		close(a.stop)
		if started {
			<-a.done
		}
	})
}

// Status is daemon.status's attention.
func (a *Attention) Status() api.AttentionStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := api.AttentionStatus{Notify: NotifyNone,
		KeepAwake: api.KeepAwakeStatus{Active: a.reason == "", Held: a.held, Reason: a.reason}}
	if a.o.Desktop != nil {
		st.Notify = NotifyDesktop
	}
	return st
}

func (a *Attention) run() {
	defer close(a.done)
	defer a.release()
	if a.o.Inhibitor != nil {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := a.o.Inhibitor.Probe(ctx)
		cancel()
		a.noteInhibitor(err)
	}
	a.sync()
	for {
		select {
		case <-a.stop:
			return
		case <-a.wake:
		}
		a.mu.Lock()
		batch := a.queue
		a.queue = nil
		a.mu.Unlock()
		a.handle(batch)
	}
}

// handle applies one batch: the inhibitor first, then the notices (see
// the package comment for why in this order).
func (a *Attention) handle(batch []event.Event) {
	turns := false
	var notices []api.AttentionNotice
	for _, ev := range batch {
		if ev.Type == event.TurnStarted || ev.Type == event.TurnCompleted {
			turns = true
		}
		if kind := kindOf(ev); kind != "" {
			notices = append(notices, api.AttentionNotice{SessionID: ev.SessionID, Kind: kind, At: ev.At})
		}
	}
	if turns {
		a.sync()
	}
	for _, n := range notices {
		a.notify(n)
	}
}

// kindOf is the attention an event calls for, "" for none: a turn that
// completed or failed (also one a crashed provider interrupted), and an
// approval request. A turn the user or the daemon ended (cancel, close,
// eviction, shutdown, restart) calls for nobody.
func kindOf(ev event.Event) string {
	switch ev.Type {
	case event.ApprovalRequested:
		return api.AttentionApprovalRequested
	case event.TurnCompleted:
		var d event.TurnCompletedData
		_ = json.Unmarshal(ev.Data, &d)
		switch {
		case d.Status == event.StatusCompleted:
			return api.AttentionTurnCompleted
		case d.Status == event.StatusFailed,
			d.Status == event.StatusInterrupted && (d.Reason == event.ReasonProviderExited || d.Reason == event.ReasonProviderError):
			return api.AttentionTurnFailed
		}
	}
	return ""
}

// sync takes the inhibitor when turns run and none is held, and releases
// it when none runs. Only the loop calls it.
func (a *Attention) sync() {
	if a.o.Inhibitor == nil || a.o.Running == nil {
		return
	}
	n := a.o.Running()
	switch {
	case n > 0 && a.inhibitor == nil:
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		c, err := a.o.Inhibitor.Inhibit(ctx, fmt.Sprintf("%d agent turn(s) running", n))
		cancel()
		a.noteInhibitor(err)
		if err != nil {
			return
		}
		a.inhibitor = c
		a.setHeld(true)
		a.log.Info("keeping the machine awake", "inhibitor", a.o.Inhibitor.Name(), "turns", n)
	case n == 0 && a.inhibitor != nil:
		a.release()
		a.log.Info("machine may sleep again", "inhibitor", a.o.Inhibitor.Name())
	}
}

// release closes a held inhibitor.
func (a *Attention) release() {
	if a.inhibitor == nil {
		return
	}
	if err := a.inhibitor.Close(); err != nil {
		a.log.Warn("releasing the sleep inhibitor", "inhibitor", a.o.Inhibitor.Name(), "err", err.Error())
	}
	a.inhibitor = nil
	a.setHeld(false)
}

func (a *Attention) setHeld(v bool) {
	a.mu.Lock()
	a.held = v
	a.mu.Unlock()
}

// noteInhibitor records whether the inhibitor works; its failure is
// logged once (and its recovery once).
func (a *Attention) noteInhibitor(err error) {
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	a.mu.Lock()
	a.reason = reason
	a.mu.Unlock()
	switch {
	case err != nil && !a.warned:
		a.warned = true
		a.log.Warn("keep-awake unavailable: the machine may sleep while turns run", "inhibitor", a.o.Inhibitor.Name(), "err", reason)
	case err == nil && a.warned:
		a.warned = false
		a.log.Info("keep-awake available again", "inhibitor", a.o.Inhibitor.Name())
	}
}

// notify posts n to the desktop (when nothing is attached), then to the
// connections.
func (a *Attention) notify(n api.AttentionNotice) {
	if a.o.Title != nil {
		n.Title = a.o.Title(n.SessionID)
	}
	if a.o.Desktop != nil && (a.o.Attached == nil || !a.o.Attached(n.SessionID)) {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := a.o.Desktop.Notify(ctx, summary(n), body(n))
		cancel()
		if err != nil {
			a.log.Warn("desktop notification failed", "session_id", n.SessionID, "kind", n.Kind, "err", err.Error())
		}
	}
	if a.o.Publish != nil {
		a.o.Publish(n)
	}
}

// summary and body are a desktop notification's text.
func summary(n api.AttentionNotice) string {
	switch n.Kind {
	case api.AttentionApprovalRequested:
		return "sessiond: an agent asks for approval"
	case api.AttentionTurnFailed:
		return "sessiond: an agent's turn failed"
	}
	return "sessiond: an agent finished its turn"
}

func body(n api.AttentionNotice) string {
	t := n.Title
	if t == "" {
		t = "session " + n.SessionID
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, t)
}
