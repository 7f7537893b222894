package journal

import (
	"context"
	"sync"

	"github.com/sessiond/sessiond/internal/event"
)

// Subscription is a live feed of one session's events with seq above the
// lastSeq Subscribe returned, in seq order, without gap or duplicate. Its
// queue is bounded (Options.QueueEvents / QueueBytes): the writer never
// waits for it; a full queue detaches the subscriber, whose Next then returns
// the events queued before and then ErrLagged.
type Subscription struct {
	j  *Journal
	id string

	maxEvents, maxBytes int

	mu     sync.Mutex
	q      []event.Event
	head   int
	bytes  int
	lagged bool // detached for a full queue: drain q, then ErrLagged
	ended  bool // journal closed or session deleted: drain q, then ErrSubscriptionClosed
	closed bool // Close: ErrSubscriptionClosed at once
	signal chan struct{}
}

func newSubscription(j *Journal, id string) *Subscription {
	return &Subscription{j: j, id: id, maxEvents: j.opts.QueueEvents, maxBytes: j.opts.QueueBytes,
		signal: make(chan struct{}, 1)}
}

// eventSize approximates an event's weight in a subscriber queue.
func eventSize(ev *event.Event) int {
	return 32 + event.EncodedSize(ev) // the row, and the Event around it
}

func (s *Subscription) wake() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// push queues ev; false means the queue was full and the subscriber is now
// detached (the caller removes it). Called by the writer with Journal.mu held.
func (s *Subscription) push(ev event.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ended || s.lagged {
		return false
	}
	size := eventSize(&ev)
	n := len(s.q) - s.head
	if n > 0 && (n+1 > s.maxEvents || s.bytes+size > s.maxBytes) {
		s.lagged = true
		s.wake()
		return false
	}
	s.q = append(s.q, ev)
	s.bytes += size
	s.wake()
	return true
}

// end stops the feed after what is queued (journal closed, session deleted).
func (s *Subscription) end(now bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	if now {
		s.closed = true
	}
	s.wake()
}

// Next returns the next event; ErrLagged once the subscriber was
// detached for a full queue (after the events queued before it),
// ErrSubscriptionClosed after Close or the journal's Close, or ctx's error.
func (s *Subscription) Next(ctx context.Context) (event.Event, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return event.Event{}, ErrSubscriptionClosed
		}
		if s.head < len(s.q) {
			ev := s.q[s.head]
			s.q[s.head] = event.Event{}
			s.head++
			s.bytes -= eventSize(&ev)
			if s.head == len(s.q) {
				s.q, s.head = s.q[:0], 0
			}
			s.mu.Unlock()
			return ev, nil
		}
		lagged, ended := s.lagged, s.ended
		s.mu.Unlock()
		switch {
		case lagged:
			return event.Event{}, ErrLagged
		case ended:
			return event.Event{}, ErrSubscriptionClosed
		}
		select {
		case <-s.signal:
		case <-ctx.Done():
			return event.Event{}, ctx.Err()
		}
	}
}

// Close detaches the subscription; Next returns ErrSubscriptionClosed.
func (s *Subscription) Close() {
	s.j.mu.Lock()
	if ss := s.j.sessions[s.id]; ss != nil {
		delete(ss.subs, s)
	}
	s.j.mu.Unlock()
	s.mu.Lock()
	s.closed = true
	s.q, s.head, s.bytes = nil, 0, 0
	s.mu.Unlock()
	s.wake()
}
