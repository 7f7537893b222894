package host

import (
	"context"
	"errors"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
)

// subscription is one attach: a journal feed owned by a connection. A
// legacy subscription is also a hold (holder "sub:<id>").
type subscription struct {
	h       *Host
	id      string
	conn    string
	session string
	feed    *journal.Subscription
	holder  string // non-empty for a legacy subscription-as-hold
}

func (s *subscription) ID() string { return s.id }

// Abandon ends the subscription if it is still the host's.
func (s *subscription) Abandon() {
	s.h.mu.Lock()
	if s.h.subs[s.id] != s {
		s.h.mu.Unlock()
		return
	}
	delete(s.h.subs, s.id)
	s.h.mu.Unlock()
	s.h.endSubscription(s)
}

func (s *subscription) Next(ctx context.Context) (event.Event, error) {
	ev, err := s.feed.Next(ctx)
	return ev, journalError(err)
}

// pageLimit is the page size for a limit already checked at the RPC edge
// (0..api.MaxPageEvents): 0 means the default page.
func pageLimit(limit int) int {
	if limit <= 0 {
		return api.DefaultPageEvents
	}
	return limit
}

// Attach returns the events after afterSeq and a feed of every later one,
// with no gap and no duplicate between them. With legacyHold the
// subscription is a hold that starts the provider child; otherwise attach
// never starts a child.
func (h *Host) Attach(ctx context.Context, conn string, p api.AttachParams, legacyHold bool) (api.AttachResult, api.Subscription, error) {
	limit := pageLimit(p.Limit)
	if _, err := h.record(p.SessionID); err != nil {
		return api.AttachResult{}, nil, err
	}
	h.mu.Lock()
	cs := h.conns[conn]
	if cs == nil {
		cs = &connState{}
		h.conns[conn] = cs
	}
	if cs.subs >= h.o.MaxSubsPerConn {
		h.mu.Unlock()
		return api.AttachResult{}, nil, &api.Error{Kind: api.KindLimitExceeded, Msg: "too many subscriptions on this connection",
			Data: map[string]any{"limit": "subscriptions", "max": h.o.MaxSubsPerConn}}
	}
	cs.subs++ // reserved now, returned on failure
	h.mu.Unlock()

	s := &subscription{h: h, id: newID("sub_"), conn: conn, session: p.SessionID}
	fail := func(err error) (api.AttachResult, api.Subscription, error) {
		h.mu.Lock()
		cs.subs--
		h.gcConnMapLocked(conn)
		h.mu.Unlock()
		return api.AttachResult{}, nil, err
	}
	if legacyHold {
		s.holder = "sub:" + s.id
		if _, err := h.Hold(ctx, conn, api.HoldParams{SessionID: p.SessionID, HolderID: s.holder}); err != nil {
			return fail(err)
		}
	}
	snap, last, more, feed, err := h.j.Subscribe(p.SessionID, p.AfterSeq, limit)
	if err != nil {
		if s.holder != "" {
			h.releaseSubHold(s)
		}
		return fail(journalError(err))
	}
	s.feed = feed
	h.mu.Lock()
	h.subs[s.id] = s
	closed := cs.closed
	h.mu.Unlock()
	if closed {
		h.ConnClosed(conn) // the connection went away meanwhile
	}
	res := api.AttachResult{SubscriptionID: s.id, Events: snap, LastSeq: last, HasMore: more}
	if res.Events == nil {
		res.Events = []event.Event{}
	}
	res.Session, _ = h.Get(ctx, p.SessionID)
	return res, s, nil
}

// Read pages a session's journal.
func (h *Host) Read(ctx context.Context, p api.ReadParams) (api.ReadResult, error) {
	limit := pageLimit(p.Limit)
	if _, err := h.record(p.SessionID); err != nil {
		return api.ReadResult{}, err
	}
	evs, last, more, err := h.j.Read(p.SessionID, p.AfterSeq, limit)
	if err != nil {
		return api.ReadResult{}, journalError(err)
	}
	if evs == nil {
		evs = []event.Event{}
	}
	return api.ReadResult{Events: evs, LastSeq: last, HasMore: more}, nil
}

// Detach ends a subscription of this connection (and a legacy one's hold).
func (h *Host) Detach(ctx context.Context, conn string, subscriptionID string) error {
	h.mu.Lock()
	s := h.subs[subscriptionID]
	if s == nil || s.conn != conn {
		h.mu.Unlock()
		return &api.Error{Kind: api.KindInvalidParams, Msg: "no subscription " + api.Quote(subscriptionID) + " on this connection",
			Data: map[string]any{"field": "subscriptionId"}}
	}
	delete(h.subs, subscriptionID)
	h.mu.Unlock()
	h.endSubscription(s)
	return nil
}

// endSubscription closes a feed removed from the map and ends its hold.
func (h *Host) endSubscription(s *subscription) {
	s.feed.Close()
	h.mu.Lock()
	if cs := h.conns[s.conn]; cs != nil {
		cs.subs--
		h.gcConnMapLocked(s.conn)
	}
	h.mu.Unlock()
	if s.holder != "" {
		h.releaseSubHold(s)
	}
}

func (h *Host) releaseSubHold(s *subscription) {
	if _, err := h.Release(context.Background(), s.conn, api.ReleaseParams{SessionID: s.session, HolderID: s.holder}); err != nil &&
		!errors.Is(err, api.ErrSessionNotFound) {
		h.log.Warn("release legacy subscription hold", "session_id", s.session, "err", err)
	}
}
