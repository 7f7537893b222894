package acpagent

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// A session's feed: the daemon's live events queue here (on the daemon
// connection's read loop, which never waits) until follow translates them
// for the editor. The queue is bounded like the daemon's own subscriber
// queues: an editor that stops reading stdout blocks follow, and the
// queue would otherwise hold the whole turn. Past the bound, or when the
// daemon lagged the subscription (agentSession.lagged), or when the
// connection was replaced, the queue is dropped and follow catches up
// from the journal where it left off: the editor sees every event once,
// in order, and the bridge holds at most one bound and one page.
const (
	maxQueueEvents = 4096
	maxQueueBytes  = 4 << 20
	// pageLimit bounds one attach or read page of a catch-up.
	pageLimit = 256
)

// onNotify runs on the daemon connection's read loop: it only queues.
func (b *bridge) onNotify(method string, params json.RawMessage) {
	switch method {
	case "agentSession.event":
		var n api.EventNotice
		if json.Unmarshal(params, &n) != nil {
			return
		}
		if s := b.lookup(n.Event.SessionID); s != nil {
			s.push(n.Event)
		}
	case "agentSession.lagged":
		var n api.LaggedNotice
		if json.Unmarshal(params, &n) != nil {
			return
		}
		b.mu.Lock()
		var hit *session
		for _, s := range b.sessions {
			s.mu.Lock()
			if s.subID == n.SubscriptionID {
				hit = s
			}
			s.mu.Unlock()
		}
		b.mu.Unlock()
		if hit != nil {
			hit.resyncFeed("the daemon lagged the subscription")
		}
	}
}

// push queues one live event, or, past the bound, drops the queue and
// has follow catch up from the journal.
func (s *session) push(ev event.Event) {
	s.mu.Lock()
	switch {
	case s.resync != "":
		// catching up: the journal has it
	case len(s.queue) >= maxQueueEvents || s.queueBytes+len(ev.Data) > maxQueueBytes:
		s.queue, s.queueBytes = nil, 0
		s.resync = "the editor is not reading: the queue reached its bound"
	default:
		s.queue = append(s.queue, ev)
		s.queueBytes += len(ev.Data)
	}
	s.mu.Unlock()
	s.poke()
}

// resyncFeed drops the queue and has follow catch up from the journal.
func (s *session) resyncFeed(why string) {
	s.mu.Lock()
	s.queue, s.queueBytes = nil, 0
	if s.resync == "" {
		s.resync = why
	}
	s.mu.Unlock()
	s.poke()
}

func (s *session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// follow translates the session's live events, in order, after the
// replay; it catches up from the journal when push or the daemon said so.
func (b *bridge) follow(ctx context.Context, s *session) {
	defer b.wg.Done()
	for {
		s.mu.Lock()
		q, why := s.queue, s.resync
		s.queue, s.queueBytes, s.resync = nil, 0, ""
		s.mu.Unlock()
		if why != "" {
			b.resync(ctx, s, why)
		}
		for _, ev := range q {
			b.translate(ctx, s, ev, false)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-s.wake:
		}
	}
}

// resync leaves the old subscription (lagged or on a replaced
// connection: already gone) and catches up from the last event translated.
func (b *bridge) resync(ctx context.Context, s *session, why string) {
	b.logf("session %s: %s: catching up from the journal after seq %d", s.id, why, s.seq())
	s.mu.Lock()
	sub := s.subID
	s.mu.Unlock()
	b.call(ctx, "agentSession.detach", map[string]string{"subscriptionId": sub}, nil)
	if err := b.catchUp(ctx, s); err != nil && ctx.Err() == nil {
		b.logf("session %s: catch up: %s", s.id, err.Message)
	}
}

func (s *session) seq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeq
}

// catchUp attaches after the last event translated and translates the
// journal up to the attach's end page by page (a session/load replays
// the whole journal so); the approvals still open at its end are put to
// the editor after it. Live events from the new subscription queue
// meanwhile; those at or before lastSeq are skipped by translate.
func (b *bridge) catchUp(ctx context.Context, s *session) *wireError {
	after := s.seq()
	var a api.AttachResult
	if err := b.call(ctx, "agentSession.attach", api.AttachParams{SessionID: s.id, AfterSeq: after, Limit: pageLimit}, &a); err != nil {
		return fromDaemon(err)
	}
	s.mu.Lock()
	s.subID = a.SubscriptionID
	s.mu.Unlock()
	open := map[string]event.Event{} // approvals requested and not resolved
	page, more := a.Events, a.HasMore
	for {
		for _, ev := range page {
			trackApproval(open, ev)
			b.translate(ctx, s, ev, true)
			after = ev.Seq
		}
		if !more || len(page) == 0 || after >= a.LastSeq {
			break
		}
		var rr api.ReadResult
		if err := b.call(ctx, "agentSession.read", api.ReadParams{SessionID: s.id, AfterSeq: after, Limit: pageLimit}, &rr); err != nil {
			return fromDaemon(err)
		}
		page, more = rr.Events, rr.HasMore
		for len(page) > 0 && page[len(page)-1].Seq > a.LastSeq {
			page = page[:len(page)-1] // the subscription delivers those
		}
	}
	waiting := make([]event.Event, 0, len(open))
	for _, ev := range open {
		waiting = append(waiting, ev)
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].Seq < waiting[j].Seq })
	for _, ev := range waiting {
		b.ask(ctx, s, ev) // still waiting: ask the editor
	}
	s.mu.Lock()
	s.lastSeq = max(s.lastSeq, a.LastSeq)
	s.mu.Unlock()
	return nil
}

// trackApproval keeps open the approvals requested and not yet resolved.
func trackApproval(open map[string]event.Event, ev event.Event) {
	switch ev.Type {
	case event.ApprovalRequested:
		var d event.ApprovalRequestedData
		if json.Unmarshal(ev.Data, &d) == nil && d.RequestID != "" {
			open[d.RequestID] = ev
		}
	case event.ApprovalResolved:
		var d event.ApprovalResolvedData
		if json.Unmarshal(ev.Data, &d) == nil {
			delete(open, d.RequestID)
		}
	}
}
