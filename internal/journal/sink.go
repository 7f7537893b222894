package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/event"
)

// Sink is the ordered entry point of one live session: Append hands drafts
// to the writer without waiting, Commit waits for durability, and both keep
// the order they were called in. Consecutive message.delta drafts of one
// turn and item (or item.delta drafts of one item and stream) are coalesced for up to Options.CoalesceWindow (measured from the
// first of them) or Options.CoalesceBytes of text: the texts are
// concatenated and the other data fields of the first delta kept.
//
// A sink lives until Discard: Close drains it and refuses further appends,
// and Journal.Sink returns that same closed sink until Discard drops it.
type Sink struct {
	j  *Journal
	id string

	mu     sync.Mutex
	pend   *pendingDelta
	timer  *time.Timer
	last   *request // the latest request handed to the writer
	closed bool

	// Asynchronous appends that failed and are not journaled yet: the next
	// hand-in (or Drain) hands a journal.loss note for them first.
	lossCount int
	lossCause string
}

// pendingDelta is a message.delta being coalesced.
type pendingDelta struct {
	first event.Draft
	key   deltaKey
	text  []byte
	n     int
}

// draft returns the coalesced delta: the first draft as is when nothing was
// merged into it, else its data with text replaced by the concatenation.
func (p *pendingDelta) draft() event.Draft {
	if p.n == 1 {
		return p.first
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(p.first.Data, &fields) // coalesceKey parsed it already
	text, _ := json.Marshal(string(p.text))
	fields["text"] = text
	d := p.first
	d.Data, _ = json.Marshal(fields)
	d.Delta = nil // the first delta's parts, not the merged text's
	return d
}

// Sink returns the session's sink, creating a fresh one when none is cached
// (none yet, or the last one was discarded).
func (j *Journal) Sink(sessionID string) *Sink {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s := j.sinks[sessionID]; s != nil {
		return s
	}
	s := &Sink{j: j, id: sessionID}
	j.sinks[sessionID] = s
	return s
}

// Append hands d to the writer without waiting. On a closed sink the draft
// is dropped and logged (Stats.Dropped).
func (s *Sink) Append(d event.Draft) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.j.dropped(s.id, d)
		return
	}
	if err := checkDraft(d); err != nil {
		s.j.log.Error("journal sink refused a draft; journaling the loss", "session_id", s.id, "type", prefix(d.Type), "err", err)
		s.j.mu.Lock()
		s.j.stats.Lost++
		s.j.mu.Unlock()
		s.flushLocked()
		s.noteLossLocked(1, lossCause(err))
		s.handLocked(s.lossRequestLocked())
		return
	}
	if d.Type == event.MessageDelta || d.Type == event.ItemDelta {
		if text, key, ok := coalesceKey(d); ok {
			limit := s.j.opts.CoalesceBytes
			if p := s.pend; p != nil && p.key == key && len(p.text)+len(text) <= limit {
				p.text = append(p.text, text...)
				p.n++
				if len(p.text) >= limit {
					s.flushLocked()
				}
				return
			}
			s.flushLocked()
			s.pend = &pendingDelta{first: d, key: key, text: []byte(text), n: 1}
			if len(text) >= limit || s.j.opts.CoalesceWindow < 0 {
				s.flushLocked()
				return
			}
			if s.timer == nil {
				s.timer = time.AfterFunc(s.j.opts.CoalesceWindow, s.flush)
			} else {
				s.timer.Reset(s.j.opts.CoalesceWindow)
			}
			return
		}
	}
	s.flushLocked()
	s.handLocked(&request{id: s.id, drafts: []event.Draft{d}, done: make(chan struct{}), sink: s})
}

// Commit appends ds after everything handed in before and waits until they
// are durable. ErrSinkClosed after Close or Discard.
func (s *Sink) Commit(ctx context.Context, ds ...event.Draft) ([]event.Event, error) {
	r, err := newRequest(s.id, ds)
	if err != nil || r == nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("session %s: append not committed: %w", s.id, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("session %s: %w", s.id, ErrSinkClosed)
	}
	s.flushLocked()
	if !s.handLocked(r) {
		s.mu.Unlock()
		return nil, fmt.Errorf("session %s: %w", s.id, ErrClosed)
	}
	s.mu.Unlock()
	return s.j.wait(ctx, r)
}

// Drain flushes the coalescing buffer and waits until everything handed in
// so far is committed. An asynchronous append that failed was replaced by a
// journal.loss row; only when even that row could not be stored does Drain
// return an error (ErrLost), and the next hand-in tries to journal it again.
// While the store refuses writes and a request of the sink is not
// committed, Drain has the held rows tried once at once and, refused
// again, returns the store's error (wrapping store.ErrUnavailable) rather
// than wait; the held requests are committed when the store takes writes
// again.
func (s *Sink) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.flushLocked()
	if s.lossCount > 0 {
		s.handLocked(s.lossRequestLocked())
	}
	r := s.last
	s.mu.Unlock()
	for r != nil {
		if err := s.awaitDone(ctx, r); err != nil {
			return err
		}
		if !r.withdrawn && r.err == nil {
			break
		}
		r = r.prev // a withdrawn or failed Commit: wait for what came before it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lossCount > 0 {
		return fmt.Errorf("session %s: %d events lost and not journaled (%s): %w", s.id, s.lossCount, s.lossCause, ErrLost)
	}
	return nil
}

// awaitDone waits for r's outcome, for ctx, or for the store to refuse
// writes while r is not committed.
func (s *Sink) awaitDone(ctx context.Context, r *request) error {
	for {
		select {
		case <-r.done:
			return nil
		default:
		}
		select {
		case <-r.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("session %s: drain: %w", s.id, ctx.Err())
		case <-s.j.refusing():
			select {
			case <-r.done:
				return nil
			default:
			}
			if s.j.Unavailable() == nil {
				continue // writable again since: wait on
			}
			// Try the held rows once now (space may have returned since
			// the last try); still refused: say so rather than wait.
			if err := s.j.retryNow(ctx); err != nil {
				return fmt.Errorf("session %s: drain: rows not committed yet: %w", s.id, err)
			}
		}
	}
}

// Close refuses further appends, then drains.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.flush()
	return s.Drain(ctx)
}

// Discard drops the sink from the journal's cache, so the next
// Journal.Sink is fresh. A sink discarded without Close is closed here (its
// buffered delta is still handed to the writer).
func (s *Sink) Discard() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.flush()
	s.j.mu.Lock()
	if s.j.sinks[s.id] == s {
		delete(s.j.sinks, s.id)
	}
	s.j.mu.Unlock()
}

// flush hands the coalescing buffer to the writer (the window timer's func).
func (s *Sink) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

func (s *Sink) flushLocked() {
	if s.timer != nil {
		s.timer.Stop()
	}
	p := s.pend
	if p == nil {
		return
	}
	s.pend = nil
	s.handLocked(&request{id: s.id, drafts: []event.Draft{p.draft()}, done: make(chan struct{}), sink: s})
}

// handLocked enqueues r after the sink's previous request, after a loss
// note for earlier failures not journaled yet.
func (s *Sink) handLocked(r *request) bool {
	if s.lossCount > 0 && r.loss == nil {
		s.handLocked(s.lossRequestLocked())
	}
	r.prev = s.last
	for r.prev != nil && settledFailed(r.prev) {
		r.prev = r.prev.prev // nothing to wait for: do not keep a chain of failures
	}
	if err := s.j.enqueue(r); err != nil {
		switch {
		case r.loss != nil:
			s.noteLossLocked(r.loss.count, r.loss.cause)
		case r.sink != nil:
			s.noteLossLocked(r.count(), lossCause(err))
		}
		s.j.log.Warn("journal sink append refused", "session_id", s.id, "err", err)
		return false
	}
	s.last = r
	return true
}

// settledFailed reports a request that failed or was withdrawn (its
// fields are final once done is closed).
func settledFailed(r *request) bool {
	select {
	case <-r.done:
		return r.withdrawn || r.err != nil
	default:
		return false
	}
}

// lossRequestLocked turns the pending loss into a note for the writer.
func (s *Sink) lossRequestLocked() *request {
	r := &request{id: s.id, sink: s, done: make(chan struct{}), loss: &lossNote{count: s.lossCount, cause: s.lossCause}}
	s.lossCount, s.lossCause = 0, ""
	return r
}

// noteLoss records asynchronous appends that failed and are not journaled.
func (s *Sink) noteLoss(count int, cause string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteLossLocked(count, cause)
}

func (s *Sink) noteLossLocked(count int, cause string) {
	s.lossCount += count
	if s.lossCause == "" {
		s.lossCause = cause
	}
}

// lossCause is err's text for a journal.loss row, at most 512 bytes.
func lossCause(err error) string {
	c := err.Error()
	if len(c) > 512 {
		c = c[:512] + "…"
	}
	return c
}

func (j *Journal) dropped(id string, d event.Draft) {
	j.mu.Lock()
	j.stats.Dropped++
	j.mu.Unlock()
	j.log.Warn("journal sink closed; draft dropped", "session_id", id, "type", d.Type)
}
