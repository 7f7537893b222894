package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/sessiond/sessiond/internal/api"
)

// notification is a JSON-RPC notification as written on the wire.
type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// notify sends a notification if its capability was negotiated. It is
// marshalled once and written straight to the stream (whose writes are
// serialised and carry the write deadline): jsonrpc2.Notify would marshal
// it three times.
func (c *conn) notify(method string, params any) error {
	if capa := notifyCaps[method]; capa != "" && !c.has(capa) {
		return nil
	}
	b, err := json.Marshal(notification{JSONRPC: "2.0", Method: method, Params: params})
	if err != nil {
		return err
	}
	return c.st.writeBytes(b)
}

// notifyEvent is notify(NotifyEvent, n) with the event encoded by hand
// (see reply.go): the same bytes, no reflection.
func (c *conn) notifyEvent(n api.EventNotice) error {
	if !c.has(notifyCaps[NotifyEvent]) {
		return nil
	}
	b, err := encodeEventNotice(n)
	if err != nil {
		return err
	}
	return c.st.writeOwned(b)
}

// startPump forwards sub's events as notifications, after the attach reply.
func (c *conn) startPump(sub api.Subscription, lastSeq uint64) {
	if sub == nil {
		return
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return // ConnClosed ends the subscription
	}
	c.pumps.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.pumps.Done()
		defer func() {
			if r := recover(); r != nil {
				c.log.Error("subscription pump panicked; closing the connection", "subscription_id", sub.ID(),
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				c.st.Close()
			}
		}()
		c.pump(sub, lastSeq)
	}()
}

func (c *conn) pump(sub api.Subscription, last uint64) {
	for {
		ev, err := sub.Next(c.ctx)
		switch {
		case errors.Is(err, api.ErrLagged):
			c.srv.stats.lagged()
			c.log.Warn("subscriber lagged, detaching", "subscription_id", sub.ID(), "last_delivered_seq", last)
			if err := c.notify(NotifyLagged, api.LaggedNotice{SubscriptionID: sub.ID(), LastDeliveredSeq: last}); err != nil {
				c.log.Debug("lagged notice not written", "err", err.Error())
			}
			if err := c.srv.o.Backend.Detach(context.WithoutCancel(c.ctx), c.id, sub.ID()); err != nil {
				c.log.Debug("detach after lag", "subscription_id", sub.ID(), "err", err.Error())
			}
			return
		case err != nil:
			return
		}
		if !c.sees(ev.Type) {
			continue // the connection did not negotiate its capability
		}
		if err := c.notifyEvent(api.EventNotice{SubscriptionID: sub.ID(), Event: ev}); err != nil {
			return
		}
		last = ev.Seq
	}
}
