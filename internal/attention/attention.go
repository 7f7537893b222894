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
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// callTimeout bounds one inhibitor or desktop call.
const callTimeout = 5 * time.Second

// retryAfter is how long after a failed probe or Inhibit no new one is
// started: while keep-awake is unavailable, turns do not each cost a bus
// connection (and the bus a failed activation of logind). The first
// batch of turn events after it tries again.
const retryAfter = 30 * time.Second

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
// No call that can hang holds the loop: Inhibit (and the first Probe)
// runs on a taker goroutine, one at a time, and desktop posts on a poster
// goroutine behind a bounded queue; releasing (closing a descriptor) is
// done by the loop itself, before the notices of the same batch.
//
// Lock order: mu only; no call out is made while holding it.
type Attention struct {
	o   Options
	log *slog.Logger

	ctx    context.Context // cancelled by Close: ends the calls under way
	cancel context.CancelFunc

	mu        sync.Mutex
	queue     []event.Event // observed, not yet handled
	held      bool
	reason    string // why keep-awake does not work now ("" when it does)
	closed    bool
	started   bool
	inhibitor io.Closer // the held inhibitor, nil when none
	want      int       // turns running at the loop's last count (> 0: an inhibitor is wanted)
	taking    bool      // a taker goroutine runs
	again     bool      // the loop wanted an inhibitor while a taker ran: it tries once more
	warned    bool      // the inhibitor's unavailability was logged
	failedAt  time.Time // when the last probe or Inhibit failed (zero: it did not)
	now       func() time.Time

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	posts     chan post // to the poster (nil: no desktop)
	calls     sync.WaitGroup
	closeOnce sync.Once

	// Only the loop touches this.
	dropping bool // desktop posts are being dropped (logged once)
}

// post is one desktop notification waiting for the poster.
type post struct {
	n             api.AttentionNotice
	summary, body string
}

// maxPosts bounds the desktop notifications waiting for a slow
// notification service; past it they are dropped (logged once).
const maxPosts = 64

// New builds an Attention; Start runs it.
func New(o Options) *Attention {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Attention{o: o, log: o.Logger, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.now = time.Now
	if o.Desktop != nil {
		a.posts = make(chan post, maxPosts)
	}
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
	if a.posts != nil {
		a.calls.Add(1)
		go a.poster()
	}
	go a.run()
}

// Close stops the loop and releases the inhibitor. Observe does nothing after.
func (a *Attention) Close() {
	a.closeOnce.Do(func() {
		a.mu.Lock()
		a.closed = true
		started := a.started
		a.mu.Unlock()
		a.cancel() // a hung Inhibit or Notify returns now
		close(a.stop)
		if started {
			<-a.done
		}
		a.calls.Wait() // a taker that got a descriptor after closed closes it
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
		a.mu.Lock()
		a.taking = true
		a.mu.Unlock()
		a.calls.Add(1)
		go a.take(true)
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

// sync asks the taker for an inhibitor when turns run and none is held,
// and releases it when none runs. Only the loop calls it.
func (a *Attention) sync() {
	if a.o.Inhibitor == nil || a.o.Running == nil {
		return
	}
	n := a.o.Running()
	a.mu.Lock()
	a.want = n
	start := false
	if n > 0 && a.inhibitor == nil {
		switch {
		case a.taking:
			a.again = true
		case !a.failedAt.IsZero() && a.now().Sub(a.failedAt) < retryAfter:
			// unavailable a moment ago: a later batch tries again
		default:
			a.taking, start = true, true
		}
	}
	a.mu.Unlock()
	if start {
		a.calls.Add(1)
		go a.take(false)
	}
	if n == 0 && a.release() {
		a.log.Info("machine may sleep again", "inhibitor", a.o.Inhibitor.Name())
	}
}

// take runs on its own goroutine, one at a time (taking): it probes
// (first) or calls Inhibit, and calls Inhibit when the loop wanted an
// inhibitor meanwhile (again) and the probe succeeded. A descriptor
// it gets when no turn runs any more, or after Close, is closed at once.
func (a *Attention) take(probe bool) {
	defer a.calls.Done()
	for {
		var (
			c   io.Closer
			err error
		)
		a.mu.Lock()
		why := fmt.Sprintf("%d agent turn(s) running", a.want)
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(a.ctx, callTimeout)
		if probe {
			err = a.o.Inhibitor.Probe(ctx)
		} else {
			c, err = a.o.Inhibitor.Inhibit(ctx, why)
		}
		cancel()
		if a.ctx.Err() == nil { // not Close's cancel: that says nothing of the inhibitor
			a.noteInhibitor(err)
		}
		a.mu.Lock()
		if c != nil {
			keep := a.want > 0 && !a.closed
			if keep {
				a.inhibitor, a.held = c, true
			}
			a.taking, a.again = false, false
			n := a.want
			a.mu.Unlock()
			if !keep {
				a.closeInhibitor(c)
				return
			}
			a.log.Info("keeping the machine awake", "inhibitor", a.o.Inhibitor.Name(), "turns", n)
			return
		}
		retry := err == nil && a.again && a.want > 0 && !a.closed // a failure waits retryAfter
		a.again = false
		if !retry {
			a.taking = false
			a.mu.Unlock()
			if probe {
				a.log.Debug("sleep inhibitor probed", "inhibitor", a.o.Inhibitor.Name(), "ok", err == nil)
			}
			return
		}
		a.mu.Unlock()
		probe = false
	}
}

// release closes a held inhibitor; it reports whether one was held.
func (a *Attention) release() bool {
	a.mu.Lock()
	c := a.inhibitor
	a.inhibitor, a.held = nil, false
	a.mu.Unlock()
	if c == nil {
		return false
	}
	a.closeInhibitor(c)
	return true
}

func (a *Attention) closeInhibitor(c io.Closer) {
	if err := c.Close(); err != nil {
		a.log.Warn("releasing the sleep inhibitor", "inhibitor", a.o.Inhibitor.Name(), "err", err.Error())
	}
}

// noteInhibitor records whether the inhibitor works; its failure is
// logged once (and its recovery once).
func (a *Attention) noteInhibitor(err error) {
	reason := ""
	if err != nil {
		reason = api.Truncate(err.Error(), maxReasonBytes)
	}
	a.mu.Lock()
	a.reason = reason
	a.failedAt = time.Time{}
	if err != nil {
		a.failedAt = a.now()
	}
	warn := err != nil && !a.warned
	recovered := err == nil && a.warned
	a.warned = err != nil
	a.mu.Unlock()
	switch {
	case warn:
		a.log.Warn("keep-awake unavailable: the machine may sleep while turns run", "inhibitor", a.o.Inhibitor.Name(), "err", reason)
	case recovered:
		a.log.Info("keep-awake available again", "inhibitor", a.o.Inhibitor.Name())
	}
}

// maxReasonBytes bounds why keep-awake is unavailable, as reported and
// logged (a bus address can be any length).
const maxReasonBytes = 512

// notify queues n for the desktop (when nothing is attached), then
// hands it to the connections. A desktop post never holds the loop: a
// full queue (a notification service that stopped answering) drops it.
func (a *Attention) notify(n api.AttentionNotice) {
	if a.o.Title != nil {
		n.Title = a.o.Title(n.SessionID)
	}
	if a.posts != nil && (a.o.Attached == nil || !a.o.Attached(n.SessionID)) {
		select {
		case a.posts <- post{n: n, summary: summary(n), body: body(n)}:
			a.dropping = false
		default:
			if !a.dropping {
				a.log.Warn("desktop notifications dropped: the notification service is not answering",
					"session_id", n.SessionID, "kind", n.Kind, "queued", maxPosts)
			}
			a.dropping = true
		}
	}
	if a.o.Publish != nil {
		a.o.Publish(n)
	}
}

// poster posts the queued desktop notifications, one at a time, until
// Close. A failure is logged once, until a post succeeds again.
func (a *Attention) poster() {
	defer a.calls.Done()
	failing := false
	for {
		var p post
		select {
		case <-a.stop:
			return
		case p = <-a.posts:
		}
		ctx, cancel := context.WithTimeout(a.ctx, callTimeout)
		err := a.o.Desktop.Notify(ctx, p.summary, p.body)
		cancel()
		switch {
		case err != nil && !failing:
			a.log.Warn("desktop notification failed", "session_id", p.n.SessionID, "kind", p.n.Kind, "err", err.Error())
		case err == nil && failing:
			a.log.Info("desktop notifications work again", "session_id", p.n.SessionID)
		}
		failing = err != nil
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

// body is the session's title (its id when it has none), cut to
// maxBodyBytes, control characters (C0, DEL, C1) made spaces.
func body(n api.AttentionNotice) string {
	t := n.Title
	if t == "" {
		t = "session " + n.SessionID
	}
	return api.Truncate(strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, t), maxBodyBytes)
}

// maxBodyBytes bounds a desktop notification's body (a title may be
// api.MaxTitleBytes long; a notification shows a line or two).
const maxBodyBytes = 200
