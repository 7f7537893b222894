package host

import "github.com/sessiond/sessiond/internal/api"

// ConnClosed ends the holds last taken on conn and its subscriptions.
func (h *Host) ConnClosed(conn string) {
	h.mu.Lock()
	cs := h.conns[conn]
	if cs != nil {
		cs.closed = true
	}
	for _, e := range h.sessions {
		for holder, hd := range e.holds {
			if hd.conn == conn {
				h.dropHoldMapLocked(e, holder, hd.token, "disconnect")
			}
		}
	}
	var subs []*subscription
	for id, s := range h.subs {
		if s.conn == conn {
			subs = append(subs, s)
			delete(h.subs, id)
		}
	}
	h.gcConnMapLocked(conn)
	h.mu.Unlock()
	for _, s := range subs {
		h.endSubscription(s)
	}
}

// connBegin registers an operation on conn, enforcing its hold limit.
func (h *Host) connBegin(conn string, holding bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := h.conns[conn]
	if cs == nil {
		cs = &connState{}
		h.conns[conn] = cs
	}
	if holding && cs.holds >= h.o.MaxHoldsPerConn {
		return &api.Error{Kind: api.KindLimitExceeded, Msg: "too many holds on this connection",
			Data: map[string]any{"limit": "holds", "max": h.o.MaxHoldsPerConn}}
	}
	cs.inflight++
	return nil
}

// connEnd ends an operation begun with connBegin.
func (h *Host) connEnd(conn string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cs := h.conns[conn]; cs != nil {
		cs.inflight--
		h.gcConnMapLocked(conn)
	}
}

func (h *Host) gcConnMapLocked(conn string) {
	if cs := h.conns[conn]; cs != nil && cs.closed && cs.inflight == 0 && cs.holds <= 0 && cs.subs <= 0 {
		delete(h.conns, conn)
	}
}
