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
	err    error // the first failure of an asynchronous append
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
	if err := checkDraft(d); err != nil || s.closed {
		s.j.dropped(s.id, d)
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
// so far is committed. It returns the first failure of an asynchronous
// append, if any.
func (s *Sink) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.flushLocked()
	r := s.last
	s.mu.Unlock()
	for r != nil {
		select {
		case <-r.done:
		case <-ctx.Done():
			return fmt.Errorf("session %s: drain: %w", s.id, ctx.Err())
		}
		if !r.withdrawn {
			break
		}
		r = r.prev // a withdrawn Commit: wait for what came before it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("session %s: %w", s.id, s.err)
	}
	return nil
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

// handLocked enqueues r after the sink's previous request.
func (s *Sink) handLocked(r *request) bool {
	r.prev = s.last
	if err := s.j.enqueue(r); err != nil {
		if s.err == nil && r.sink != nil {
			s.err = err
		}
		s.j.log.Warn("journal sink append refused", "session_id", s.id, "err", err)
		return false
	}
	s.last = r
	return true
}

func (s *Sink) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (j *Journal) dropped(id string, d event.Draft) {
	j.mu.Lock()
	j.stats.Dropped++
	j.mu.Unlock()
	j.log.Warn("journal sink closed; draft dropped", "session_id", id, "type", d.Type)
}
