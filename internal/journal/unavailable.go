package journal

import (
	"context"
	"time"
)

// When the store refuses a commit as a whole (store.ErrUnavailable: disk
// full, an I/O error), nothing of the batch was stored or published. The
// writer then
//   - fails the synchronous requests (Append, Commit, Delete) with that
//     error at once: their callers changed nothing and can say so;
//   - holds the asynchronous ones (sink appends, loss notes), in order, and
//     retries them with backoff, ahead of anything handed in later: a
//     provider's rows (its turn.completed) land when space returns;
//   - reports the store unavailable (Unavailable, Stats.Unavailable); a
//     Sink.Drain then has the held rows tried once at once (retryNow) and
//     returns the store's error if that fails too, instead of waiting.
// Held rows are bounded by Options.HeldBytes: past it they are dropped as a
// loss (journal.loss, the open turn failed), journaled when space returns.
// Close drops what is still held the same way.

// Retry backoff of held rows.
const (
	heldRetryMin = 20 * time.Millisecond
	heldRetryMax = time.Second
)

// DefaultHeldBytes bounds the sink rows held while the store refuses writes.
const DefaultHeldBytes = 8 << 20

// Unavailable returns the store's last failure while it refuses writes
// (the error wraps store.ErrUnavailable), nil while it takes them.
func (j *Journal) Unavailable() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.unavail
}

// Writable returns nil while the store takes writes. While it refuses
// them (Unavailable), the held rows are tried once at once and the
// store's error (wrapping store.ErrUnavailable) is returned if that fails
// too. A call that acts on a provider and then journals what it did
// (send, respond, cancel) asks this first: refused, it has changed
// nothing, and the provider never heard of it.
func (j *Journal) Writable(ctx context.Context) error {
	if j.Unavailable() == nil {
		return nil
	}
	return j.retryNow(ctx)
}

// retryNow has the writer try the held rows at once (ahead of the
// backoff) and returns the outcome: nil once the store took them.
func (j *Journal) retryNow(ctx context.Context) error {
	r := &request{probe: true, done: make(chan struct{})}
	if err := j.enqueue(r); err != nil {
		return err
	}
	_, err := j.wait(ctx, r)
	return err
}

// refusing returns a channel closed once the store refuses writes (at
// once if it does now).
func (j *Journal) refusing() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.unavailCh
}

// markUnavailable records a failure of the store as a whole; the first one
// is logged at error level, later ones (retries) at debug.
func (j *Journal) markUnavailable(err error, held int) {
	j.mu.Lock()
	first := j.unavail == nil
	j.unavail = err
	j.stats.Failed++
	if first {
		j.unavailAt = j.opts.Now()
		close(j.unavailCh)
	}
	j.mu.Unlock()
	if first {
		j.log.Error("journal commit failed: store unavailable; sink rows are held and retried, other appends refused",
			"held", held, "err", err)
		return
	}
	j.log.Debug("journal store still unavailable", "held", held, "err", err)
}

// markWritable ends an outage after a commit succeeded.
func (j *Journal) markWritable(committed int) {
	j.mu.Lock()
	if j.unavail == nil {
		j.mu.Unlock()
		return
	}
	since := j.unavailAt
	j.unavail = nil
	j.nheld = len(j.held)
	j.unavailCh = make(chan struct{})
	j.mu.Unlock()
	j.log.Info("journal store writable again", "requests", committed,
		"unavailable_ms", j.opts.Now().Sub(since).Milliseconds())
}

// refused settles a batch the store refused as a whole: synchronous
// requests fail with err, sink requests are held for a retry (dropped as a
// loss past Options.HeldBytes). batch starts with the held requests.
func (j *Journal) refused(batch []*request, err error) {
	j.held, j.heldBytes = nil, 0
	var waiting []*request
	for _, r := range batch {
		if r.sink == nil {
			waiting = append(waiting, r)
			continue
		}
		j.held = append(j.held, r)
		j.heldBytes += r.size()
	}
	j.markUnavailable(err, len(j.held))
	j.boundHeld(err)
	j.noteHeld()
	for _, r := range waiting { // woken once the state says why
		r.events, r.err = nil, err
		close(r.done)
	}
}

// hold adds sink requests taken while the store is unavailable without
// trying a commit (the retry timer does).
func (j *Journal) hold(rs []*request, err error) {
	for _, r := range rs {
		j.held = append(j.held, r)
		j.heldBytes += r.size()
	}
	j.boundHeld(err)
	j.noteHeld()
}

// boundHeld drops every held request as a loss once they pass HeldBytes.
func (j *Journal) boundHeld(err error) {
	if j.heldBytes <= j.opts.HeldBytes {
		return
	}
	j.log.Error("journal store unavailable too long: held sink rows dropped as a loss",
		"held", len(j.held), "held_bytes", j.heldBytes, "limit", j.opts.HeldBytes, "err", err)
	j.fail(j.held, err)
	j.held, j.heldBytes = nil, 0
}

// withHeld puts the held requests ahead of b, for one commit attempt.
func (j *Journal) withHeld(b []*request) []*request {
	if len(j.held) == 0 {
		return b
	}
	out := append(j.held, b...)
	j.held, j.heldBytes = nil, 0
	return out
}

// hasSync reports a request whose caller waits for its outcome.
func hasSync(b []*request) bool {
	for _, r := range b {
		if r.sink == nil {
			return true
		}
	}
	return false
}

// size is what a request holds in memory, for HeldBytes.
func (r *request) size() int {
	n := 64
	for _, d := range r.drafts {
		n += len(d.Type) + len(d.TurnID) + len(d.Data)
	}
	return n
}

// backoff is the writer's retry timer for held requests.
type backoff struct {
	t    *time.Timer
	next time.Duration
	on   bool
}

func newBackoff() *backoff {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &backoff{t: t, next: heldRetryMin}
}

// arm schedules a retry while requests are held (each retry waits twice as
// long, up to heldRetryMax) and resets the backoff once none are.
func (b *backoff) arm(held bool) {
	if !held {
		if b.on {
			b.t.Stop()
			b.on = false
		}
		b.next = heldRetryMin
		return
	}
	if b.on {
		return
	}
	b.t.Reset(b.next)
	b.on = true
	b.next = min(2*b.next, heldRetryMax)
}

// fired is the timer's channel; call done after receiving from it.
func (b *backoff) fired() <-chan time.Time { return b.t.C }

func (b *backoff) done() { b.on = false }

// rearm publishes the held count and schedules the next retry.
func (j *Journal) rearm(b *backoff) {
	j.noteHeld()
	b.arm(len(j.held) > 0)
}

// noteHeld publishes the held count for Stats.
func (j *Journal) noteHeld() {
	j.mu.Lock()
	j.nheld = len(j.held)
	j.mu.Unlock()
}
